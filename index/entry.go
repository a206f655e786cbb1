package index

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// BaseKind records why a revision is stored the way it is.
type BaseKind uint8

// The base kinds. A fulltext and an intermediate snapshot are the
// "snapshots" of a file (sparse-revlog style): chains start at a fulltext and
// may pass through intermediate snapshots before ordinary deltas.
const (
	KindFull         BaseKind = iota + 1 // fulltext, no base
	KindP1                               // delta against the first parent
	KindP2                               // delta against the second parent
	KindSnapshot                         // delta against the file's latest snapshot
	KindHint                             // delta against a caller hint (e.g. copy source)
	KindIntermediate                     // intermediate snapshot: delta against a snapshot
	KindDedup                            // same content as Base; no data of its own
	KindReused                           // delta carried in by the caller, stored verbatim
	// KindP1P2: a delta against the concatenation of two bases' texts,
	// Base's then Base2's (a merge's parents; objstore's graph read).
	KindP1P2
	kindEnd
)

var kindNames = [...]string{"", "full", "p1", "p2", "snapshot", "hint", "intermediate", "dedup", "reused", "p1+p2"}

// String names the kind as Stats reports it.
func (k BaseKind) String() string {
	if k == 0 || k >= kindEnd {
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
	return kindNames[k]
}

// Kinds lists every valid base kind, in order.
func Kinds() []BaseKind {
	ks := make([]BaseKind, 0, int(kindEnd)-1)
	for k := KindFull; k < kindEnd; k++ {
		ks = append(ks, k)
	}
	return ks
}

// IsSnapshot reports whether a revision of this kind starts or extends a
// snapshot chain (a fulltext or an intermediate snapshot).
func (k BaseKind) IsSnapshot() bool { return k == KindFull || k == KindIntermediate }

// Flags describe how a revision's record payload is encoded.
type Flags uint16

// Flag bits. The low byte is the record's flags (objstore's record.go);
// the bits above it live in the index only.
const (
	FlagZstd  Flags = 1 << 0 // payload is zstd-compressed
	FlagDelta Flags = 1 << 1 // payload is a delta against Base
	// FlagChunked: the payload is a fulltext in independently encoded
	// chunks (objstore's chunked.go; store format 2).
	FlagChunked Flags = 1 << 2
	// FlagLateTable, with FlagChunked: the chunked record was streamed,
	// its chunk table written after its chunks, and its checksum sums
	// them in that order (objstore's record.go; store format 3).
	FlagLateTable Flags = 1 << 3

	// FlagHashDeferred lives in the index only, never in a record: the
	// revision was stored from a delta alone (objstore's delta-only put)
	// and Hash is 0, not the content hash; reads trust the records'
	// checksums for it.
	FlagHashDeferred Flags = 1 << 8
	// FlagRepacked lives in the index only: a repack chose how this
	// revision is stored after trying its whole window of candidates.
	// A later repack with reuse keeps that choice verbatim (git's delta
	// reuse) as long as it meets the caps.
	FlagRepacked Flags = 1 << 9
	// FlagFastZstd lives in the index only: the fulltext is stored in a
	// fast first form by a writer that must keep up: compressed at zstd's
	// fastest level (the mount, objstore.Config.FastFulltexts), or a big
	// streamed fulltext with chunks stored raw to save time
	// (objstore.Store.PutFrom). A repack recompresses it.
	FlagFastZstd Flags = 1 << 10
	// FlagLost lives in the index only: the revision's data was lost to
	// damage (a segment cut short, a bad record) and nothing held its
	// content any more when a salvage (objstore.Repack with Salvage)
	// rewrote the store. The entry keeps the revision's place, parents,
	// size, hash and time; it has no record (Kind full, no base, Stored
	// 0) and every read of it fails (objstore.ErrLost).
	FlagLost Flags = 1 << 11
)

// Lost reports whether the revision's data was lost (FlagLost).
func (e *Entry) Lost() bool { return e.Flags&FlagLost != 0 }

// HashIndexed reports whether the entry has a row under its content hash
// (Commit writes one): a revision with data of its own and a hash to find
// it by, whose data is not lost.
func (e *Entry) HashIndexed() bool {
	return e.Kind != KindDedup && e.Flags&(FlagHashDeferred|FlagLost) == 0
}

// RecordFlags returns the flags a revision's segment record carries.
func (f Flags) RecordFlags() Flags {
	return f &^ (FlagHashDeferred | FlagRepacked | FlagFastZstd | FlagLost)
}

// Entry is the index record of one revision.
type Entry struct {
	File       FileID
	Rev        Rev
	P1, P2     RevID    // parents; null when absent
	Base       RevID    // delta base (or dedup target); null for a fulltext
	Base2      RevID    // second delta base (KindP1P2 only: the delta's base is Base's text then Base2's); else null
	Kind       BaseKind // why it is stored this way
	ChainLen   uint32   // deltas applied to rebuild it (0 for a fulltext); with KindP1P2 in its graph, each distinct record once
	ChainBytes uint64   // stored bytes read to rebuild it, whole chain (or record graph, each record once)
	Size       uint64   // fulltext length
	Stored     uint32   // length of its own segment record (0 for dedup)
	Hash       uint64   // xxhash64 of the fulltext; 0 with FlagHashDeferred
	Seg        uint32   // segment holding the record
	Off        uint64   // record offset in that segment
	Flags      Flags
	Time       int64 // unix nanoseconds of the put, or of when its content was taken (objstore.PutRequest.Time)
}

// ID returns the entry's RevID.
func (e Entry) ID() RevID { return RevID{File: e.File, Rev: e.Rev} }

// ErrDecode is matched by errors.Is for any malformed index value.
var ErrDecode = errors.New("index: malformed value")

// Entry encodings: version 1 has no Base2; version 2, written only for an
// entry with a Base2, has it right after Base. An entry without one is
// written as version 1, byte for byte what builds before Base2 wrote.
const (
	entryVersion  = 1
	entryVersion2 = 2
)

// MarshalBinary encodes e compactly: a version byte then varints.
func (e *Entry) MarshalBinary() ([]byte, error) {
	return e.appendBinary(make([]byte, 0, 64)), nil
}

func (e *Entry) appendBinary(b []byte) []byte {
	ids := []RevID{e.P1, e.P2, e.Base}
	if e.Base2.IsNull() {
		b = append(b, entryVersion)
	} else {
		b = append(b, entryVersion2)
		ids = append(ids, e.Base2)
	}
	b = binary.AppendUvarint(b, uint64(e.File))
	b = binary.AppendUvarint(b, uint64(e.Rev))
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(id.File))
		b = binary.AppendUvarint(b, uint64(id.Rev))
	}
	b = append(b, byte(e.Kind))
	b = binary.AppendUvarint(b, uint64(e.ChainLen))
	b = binary.AppendUvarint(b, e.ChainBytes)
	b = binary.AppendUvarint(b, e.Size)
	b = binary.AppendUvarint(b, uint64(e.Stored))
	b = binary.BigEndian.AppendUint64(b, e.Hash)
	b = binary.AppendUvarint(b, uint64(e.Seg))
	b = binary.AppendUvarint(b, e.Off)
	b = binary.AppendUvarint(b, uint64(e.Flags))
	return binary.AppendVarint(b, e.Time)
}

// UnmarshalBinary decodes what MarshalBinary wrote; any malformed or
// trailing byte gives an error wrapping ErrDecode.
func (e *Entry) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	v := d.byte()
	if v != entryVersion && v != entryVersion2 {
		return fmt.Errorf("%w: entry version %d", ErrDecode, v)
	}
	var x Entry
	x.File = FileID(d.uvarint(1<<64 - 1))
	x.Rev = Rev(d.uvarint(1<<32 - 1))
	ids := []*RevID{&x.P1, &x.P2, &x.Base}
	if v == entryVersion2 {
		ids = append(ids, &x.Base2)
	}
	for _, id := range ids {
		id.File = FileID(d.uvarint(1<<64 - 1))
		id.Rev = Rev(d.uvarint(1<<32 - 1))
	}
	x.Kind = BaseKind(d.byte())
	x.ChainLen = uint32(d.uvarint(1<<32 - 1))
	x.ChainBytes = d.uvarint(1<<64 - 1)
	x.Size = d.uvarint(1<<64 - 1)
	x.Stored = uint32(d.uvarint(1<<32 - 1))
	x.Hash = d.uint64()
	x.Seg = uint32(d.uvarint(1<<32 - 1))
	x.Off = d.uvarint(1<<64 - 1)
	x.Flags = Flags(d.uvarint(1<<16 - 1))
	x.Time = d.varint()
	if err := d.finish(); err != nil {
		return err
	}
	if v == entryVersion2 && x.Base2.IsNull() {
		return fmt.Errorf("%w: entry version 2 without a second base", ErrDecode)
	}
	if err := x.check(); err != nil {
		return err
	}
	*e = x
	return nil
}

// check rejects field combinations no store ever writes.
func (e *Entry) check() error {
	switch {
	case e.File == 0:
		return fmt.Errorf("%w: entry with file 0", ErrDecode)
	case e.Kind == 0 || e.Kind >= kindEnd:
		return fmt.Errorf("%w: entry kind %d", ErrDecode, e.Kind)
	case (e.Kind == KindFull) != e.Base.IsNull():
		return fmt.Errorf("%w: kind %v with base %v", ErrDecode, e.Kind, e.Base)
	case (e.Kind == KindP1P2) != !e.Base2.IsNull():
		return fmt.Errorf("%w: kind %v with second base %v", ErrDecode, e.Kind, e.Base2)
	case e.Kind == KindP1P2 && e.Base == e.Base2:
		return fmt.Errorf("%w: kind %v with the same base twice (%v)", ErrDecode, e.Kind, e.Base)
	case e.Kind == KindP1P2 && e.Flags&FlagDelta == 0:
		return fmt.Errorf("%w: kind %v without the delta flag", ErrDecode, e.Kind)
	case e.Flags&FlagLost != 0 && (e.Kind != KindFull || e.Stored != 0 || e.Flags.RecordFlags() != 0):
		return fmt.Errorf("%w: a lost revision with a record (kind %v, %d bytes, flags %#x)", ErrDecode, e.Kind, e.Stored, e.Flags)
	}
	return nil
}
