package index

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/cespare/xxhash/v2"
)

// Refs is the set of revisions a snapshot references, for a later garbage
// collector: a compressed 64-bit roaring bitmap.
//
// A RevID maps to the bitmap value Rev<<32 | File (see RefKey). The
// revision number goes in the high half on purpose: roaring64 splits a
// value into a 32-bit bucket key and a 32-bit container value, so this
// way a snapshot's files, most of them at low revision numbers, fall into
// a few buckets of densely allocated FileIDs, which roaring stores as runs
// (a tree of 100,000 files at revision 0 takes a few bytes). With the
// file in the high half, every file would be a bucket of its own.
// FileIDs are allocated from 1 upwards, so the limit of 2^32 files per
// store is far off; RefKey refuses a larger one rather than alias it.
type Refs = roaring64.Bitmap

// NewRefs returns an empty reference set.
func NewRefs() *Refs { return roaring64.New() }

// RefKey maps id to its bitmap value.
func RefKey(id RevID) (uint64, error) {
	if id.File >= 1<<32 {
		return 0, fmt.Errorf("file %d beyond the 2^32 files a reference set holds", id.File)
	}
	return uint64(id.Rev)<<32 | uint64(id.File), nil
}

// RefID maps a bitmap value back to its RevID.
func RefID(v uint64) RevID { return RevID{File: FileID(v & (1<<32 - 1)), Rev: Rev(v >> 32)} }

// encodeRefs serialises r (run-optimised) behind an xxhash64 of the bytes,
// so that decodeRefs rejects damage before roaring parses it.
func encodeRefs(r *Refs) ([]byte, error) {
	r.RunOptimize()
	body, err := r.ToBytes()
	if err != nil {
		return nil, fmt.Errorf("encode reference set: %w", err)
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(body)), xxhash.Sum64(body))
	return append(b, body...), nil
}

// decodeRefs parses what encodeRefs wrote; bad bytes give an error
// wrapping ErrDecode, never a panic.
func decodeRefs(b []byte) (r *Refs, err error) {
	if len(b) < 8 || binary.BigEndian.Uint64(b) != xxhash.Sum64(b[8:]) {
		return nil, fmt.Errorf("%w: reference set checksum", ErrDecode)
	}
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("%w: reference set: %v", ErrDecode, p)
		}
	}()
	body := b[8:]
	// roaring64 allocates for the bucket count before reading a bucket:
	// bound it by the bytes there (each bucket takes at least a 4-byte key
	// and an 8-byte 32-bit bitmap header).
	if len(body) < 8 || binary.LittleEndian.Uint64(body) > uint64(len(body)-8)/12 {
		return nil, fmt.Errorf("%w: reference set bucket count", ErrDecode)
	}
	r = roaring64.New()
	n, err := r.ReadFrom(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: reference set: %w", ErrDecode, err)
	}
	if n != int64(len(body)) {
		return nil, fmt.Errorf("%w: reference set: trailing bytes", ErrDecode)
	}
	// Not r.Validate(): roaring parses containers it would not write (a
	// run reaching past 65535 wraps round), but only a writer's bug could
	// put one behind the checksum, and Validate is quadratic in a
	// container's runs (0.5-0.8 s for a set of 16 containers of 2,000
	// runs, decoded at every snapshot creation and by gc).
	return r, nil
}
