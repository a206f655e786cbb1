package index

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// SnapshotID identifies a snapshot for its whole life; a rename keeps it.
// Ids start at 1 and are never reused.
type SnapshotID uint64

// Snapshot is the record of one snapshot of the whole tree.
type Snapshot struct {
	ID   SnapshotID
	Name string
	Time int64 // unix nanoseconds of its creation
	// Root is the tree's root directory: its attributes and its Tree.
	Root TreeEntry
	// Prev is the snapshot whose reference set this one's was built from
	// (0: built from nothing).
	Prev SnapshotID
}

// ErrExists is matched by errors.Is when a snapshot name is taken.
var ErrExists = errors.New("already exists")

const snapVersion = 1

// MarshalBinary encodes s.
func (s *Snapshot) MarshalBinary() ([]byte, error) {
	b := []byte{snapVersion}
	b = appendUvarints(b, uint64(s.ID), uint64(s.Time), uint64(s.Prev))
	root := s.Root
	root.Name = s.Name // the root entry carries the snapshot's name
	return appendEntry(b, &root), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote.
func (s *Snapshot) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != snapVersion {
		return fmt.Errorf("%w: snapshot version %d", ErrDecode, v)
	}
	id, t, prev := d.uvarint(1<<64-1), d.uvarint(1<<64-1), d.uvarint(1<<64-1)
	root := decodeEntry(&d)
	if err := d.finish(); err != nil {
		return fmt.Errorf("snapshot record: %w", err)
	}
	if !root.IsDir() {
		return fmt.Errorf("%w: snapshot root is not a directory", ErrDecode)
	}
	*s = Snapshot{ID: SnapshotID(id), Name: root.Name, Time: int64(t), Root: root, Prev: SnapshotID(prev)}
	s.Root.Name = ""
	return nil
}

func appendUvarints(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}
