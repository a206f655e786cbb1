package index

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cespare/xxhash/v2"
)

// Probing a stored reference set without decoding it. History views ask
// every snapshot which revisions of one file it holds: decoding each set
// (allocating a container per bucket) costs tens of microseconds, where
// walking its bytes costs a few. The walk follows the roaring64 format
// (the RoaringFormatSpec's 64-bit extension, as encodeRefs writes it: a
// little-endian bucket count, then per bucket a 32-bit high key and a
// 32-bit roaring bitmap) and reads, in each bucket, only the container
// that can hold the file. Since RefKey puts the revision in the high half
// and the file in the low half, a bucket is one revision number and the
// file is a low value: the revisions of f a set holds are the buckets
// whose bitmap contains f.

// Roaring constants of the 32-bit format.
const (
	roaringCookieRuns   = 12347 // low 16 bits of the cookie; high 16: containers-1
	roaringCookieNoRuns = 12346 // followed by a uint32 container count
	roaringNoOffsets    = 4     // with runs, fewer containers than this have no offset header
	roaringMaxArray     = 4096  // larger containers are 8 KiB bitmaps
)

// RawRefs is a stored reference set, checksum checked, not decoded.
type RawRefs []byte

// FileRevs appends to dst the revisions of file f that the set holds, in
// order. Malformed bytes give an error wrapping ErrDecode.
func (r RawRefs) FileRevs(dst []Rev, f FileID) ([]Rev, error) {
	if f >= 1<<32 {
		return dst, nil
	}
	b := []byte(r)
	if len(b) < 8 {
		return dst, fmt.Errorf("%w: reference set bucket count", ErrDecode)
	}
	n, p := binary.LittleEndian.Uint64(b), 8
	if n > uint64(len(b)-8)/12 {
		return dst, fmt.Errorf("%w: reference set bucket count", ErrDecode)
	}
	for range n {
		if p+4 > len(b) {
			return dst, fmt.Errorf("%w: reference set bucket key", ErrDecode)
		}
		hi := binary.LittleEndian.Uint32(b[p:])
		end, has, err := bitmapHas(b, p+4, uint32(f))
		if err != nil {
			return dst, err
		}
		if has {
			dst = append(dst, Rev(hi))
		}
		p = end
	}
	if p != len(b) {
		return dst, fmt.Errorf("%w: reference set: trailing bytes", ErrDecode)
	}
	return dst, nil
}

// rawRefs checks b's checksum (see encodeRefs) and returns its body.
func rawRefs(b []byte) (RawRefs, error) {
	if len(b) < 8 || binary.BigEndian.Uint64(b) != xxhash.Sum64(b[8:]) {
		return nil, fmt.Errorf("%w: reference set checksum", ErrDecode)
	}
	return RawRefs(b[8:]), nil
}

// bitmapHas reads the 32-bit roaring bitmap at b[p:] and returns where it
// ends and whether it contains x.
func bitmapHas(b []byte, p int, x uint32) (end int, has bool, err error) {
	bad := func(what string) (int, bool, error) {
		return 0, false, fmt.Errorf("%w: reference set bitmap %s at %d", ErrDecode, what, p)
	}
	if p+4 > len(b) {
		return bad("cookie")
	}
	cookie := binary.LittleEndian.Uint32(b[p:])
	var size int
	var runs []byte
	switch {
	case cookie&0xffff == roaringCookieRuns:
		size = int(cookie>>16) + 1
		p += 4
		if p+(size+7)/8 > len(b) {
			return bad("run flags")
		}
		runs, p = b[p:p+(size+7)/8], p+(size+7)/8
	case cookie == roaringCookieNoRuns:
		if p+8 > len(b) {
			return bad("size")
		}
		size, p = int(binary.LittleEndian.Uint32(b[p+4:])), p+8
	default:
		return bad("cookie")
	}
	if size > 1<<16 || p+4*size > len(b) {
		return bad("header")
	}
	header := b[p : p+4*size]
	p += 4 * size
	if runs == nil || size >= roaringNoOffsets {
		p += 4 * size // offsets: not needed for a sequential walk
	}
	for i := range size {
		key := binary.LittleEndian.Uint16(header[4*i:])
		card := int(binary.LittleEndian.Uint16(header[4*i+2:])) + 1
		isRun := runs != nil && runs[i/8]&(1<<(i%8)) != 0
		var clen int
		switch {
		case isRun:
			if p+2 > len(b) {
				return bad("run count")
			}
			clen = 2 + 4*int(binary.LittleEndian.Uint16(b[p:]))
		case card > roaringMaxArray:
			clen = 8192
		default:
			clen = 2 * card
		}
		if p+clen > len(b) {
			return bad("container")
		}
		if key == uint16(x>>16) {
			has = containerHas(b[p:p+clen], isRun, card, uint16(x))
		}
		p += clen
	}
	return p, has, nil
}

// containerHas reports whether a serialized container holds v.
func containerHas(c []byte, isRun bool, card int, v uint16) bool {
	u16 := func(i int) uint16 { return binary.LittleEndian.Uint16(c[2*i:]) }
	switch {
	case isRun: // count, then (start, length-1) pairs sorted by start
		nr := int(u16(0))
		i := sort.Search(nr, func(i int) bool { return u16(1+2*i) > v }) - 1
		return i >= 0 && uint32(v) <= uint32(u16(1+2*i))+uint32(u16(2+2*i))
	case card > roaringMaxArray:
		return binary.LittleEndian.Uint64(c[8*(v/64):])&(1<<(v%64)) != 0
	}
	i := sort.Search(card, func(i int) bool { return u16(i) >= v })
	return i < card && u16(i) == v
}
