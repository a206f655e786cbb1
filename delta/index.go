package delta

import (
	"encoding/binary"
	"math/bits"
)

const (
	// blockSize is the stride at which base positions are entered into the
	// index. With keyLen bytes hashed per position, any match of at least
	// blockSize+keyLen-1 bytes contains an indexed position, so it is found.
	// Sampling every 16th position keeps the index at a quarter of the base's
	// size (4-byte slots), like xdelta's and git's block sampling.
	blockSize = 16
	// keyLen is how many bytes a hash key covers. Sixteen bytes make chance
	// hits on common short strings (indentation, repeated words in text) rare,
	// so almost every table hit verifies.
	keyLen = 16
)

// table is an open hash table from keyLen-byte keys to sampled base offsets.
// Each slot holds a block number plus one (0 means empty); a later block with
// the same hash replaces an earlier one, which costs nothing in correctness:
// every hit is verified against the bytes.
type table struct {
	slots  []uint32
	shift  uint8 // 64 - log2(len(slots))
	start  int   // base offset of block 0
	stride int   // base bytes between blocks
}

// hashAt hashes the keyLen bytes of b at i. The caller guarantees
// i+keyLen <= len(b).
func hashAt(b []byte, i int) uint64 {
	x := binary.LittleEndian.Uint64(b[i:])
	y := binary.LittleEndian.Uint64(b[i+8:])
	return (x ^ bits.RotateLeft64(y, 29)) * 0x9E3779B97F4A7C15
}

// newTable indexes base[start:end] into a table sized for it. slots may be
// passed in to reuse an allocation of the right size.
func newTable(base []byte, start, end int, slots []uint32) *table {
	t := &table{start: start, stride: blockSize}
	n := end - start
	if n < keyLen {
		return t
	}
	// Block numbers must fit in a uint32 (minus the empty marker): beyond
	// 64 GiB the stride grows instead.
	for (n-keyLen)/t.stride >= 1<<32-2 {
		t.stride *= 2
	}
	nblocks := (n-keyLen)/t.stride + 1
	logSlots := max(4, bits.Len(uint(nblocks-1)))
	if cap(slots) >= 1<<logSlots {
		slots = slots[:1<<logSlots]
		clear(slots)
	} else {
		slots = make([]uint32, 1<<logSlots)
	}
	t.slots = slots
	t.shift = uint8(64 - logSlots)
	for i := range nblocks {
		pos := start + i*t.stride
		t.slots[hashAt(base, pos)>>t.shift] = uint32(i + 1)
	}
	return t
}

// lookup returns a base offset whose key hashes like target[i:i+keyLen], or -1.
// The hit is not verified.
func (t *table) lookup(target []byte, i int) int {
	if len(t.slots) == 0 {
		return -1
	}
	s := t.slots[hashAt(target, i)>>t.shift]
	if s == 0 {
		return -1
	}
	return t.start + int(s-1)*t.stride
}

// Index is a hash index over a base, built once and reused to encode any
// number of targets against that base. It is read-only after NewIndex and safe
// for concurrent use. Its memory is at most half the base's length.
type Index struct {
	base []byte
	tab  *table
}

// NewIndex indexes base. The Index keeps base; the caller must not modify it.
func NewIndex(base []byte) *Index {
	return &Index{base: base, tab: newTable(base, 0, len(base), nil)}
}

// Base returns the base the index was built over.
func (ix *Index) Base() []byte { return ix.base }

// Encode returns a CodecCopy delta that turns ix.Base() into target.
func (ix *Index) Encode(target []byte) []byte {
	return encode(ix.base, target, ix.tab)
}
