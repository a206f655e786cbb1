package delta

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// bulk is the chunk that matchLen hands to bytes.Equal: large enough to run at
// the runtime's vectorised memcmp speed, small enough that the final narrowing
// loop stays short.
const bulk = 256

// matchLen returns the length of the common prefix of a and b.
func matchLen(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+bulk <= n && bytes.Equal(a[i:i+bulk], b[i:i+bulk]) {
		i += bulk
	}
	for i+8 <= n {
		x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:])
		if x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// matchLenBack returns the length of the common suffix of a and b.
func matchLenBack(a, b []byte) int {
	n := min(len(a), len(b))
	la, lb := len(a), len(b)
	i := 0
	for i+bulk <= n && bytes.Equal(a[la-i-bulk:la-i], b[lb-i-bulk:lb-i]) {
		i += bulk
	}
	for i+8 <= n {
		x := binary.LittleEndian.Uint64(a[la-i-8:]) ^ binary.LittleEndian.Uint64(b[lb-i-8:])
		if x != 0 {
			return i + bits.LeadingZeros64(x)/8
		}
		i += 8
	}
	for i < n && a[la-i-1] == b[lb-i-1] {
		i++
	}
	return i
}
