package testutil

import (
	"encoding/binary"
	"math/rand/v2"
)

// Bytes returns n pseudo-random bytes that depend only on seed, so tests
// and benchmarks generate the same data on every run and every machine.
func Bytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	var word [8]byte
	for i := 0; i < n; i += len(word) {
		binary.LittleEndian.PutUint64(word[:], r.Uint64())
		copy(b[i:], word[:])
	}
	return b
}
