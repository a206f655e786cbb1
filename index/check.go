package index

import (
	"context"
	"encoding/binary"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// Lenient scans for verification: where All, Files and Snapshots stop at
// the first value that does not decode, these hand every key's decoding
// error to the caller and go on, so that a checker can name every bad row.

// EachEntry calls fn with every revision row in key order: the RevID its
// key names, its entry, and the error decoding it (nil when the value
// decodes and names the same revision as its key).
func (db *DB) EachEntry(ctx context.Context, fn func(id RevID, e Entry, err error) error) error {
	err := db.scan(ctx, prefixRev, true, func(k, v []byte) error {
		var id RevID
		if len(k) != len(prefixRev)+12 {
			return fn(id, Entry{}, fmt.Errorf("%w: revision key %x", ErrDecode, k))
		}
		id = RevID{File: FileID(binary.BigEndian.Uint64(k[2:])), Rev: Rev(binary.BigEndian.Uint32(k[10:]))}
		var e Entry
		err := e.UnmarshalBinary(v)
		if err == nil && e.ID() != id {
			err = fmt.Errorf("%w: row of %v holds the entry of %v", ErrDecode, id, e.ID())
		}
		return fn(id, e, err)
	})
	if err != nil {
		return fmt.Errorf("index: revisions: %w", err)
	}
	return nil
}

// EachFile calls fn with every file row: its FileID, its record and the
// error decoding it.
func (db *DB) EachFile(ctx context.Context, fn func(f FileID, m FileMeta, err error) error) error {
	err := db.scan(ctx, prefixFile, true, func(k, v []byte) error {
		if len(k) != len(prefixFile)+8 {
			return fn(0, FileMeta{}, fmt.Errorf("%w: file key %x", ErrDecode, k))
		}
		var m FileMeta
		err := m.UnmarshalBinary(v)
		return fn(FileID(binary.BigEndian.Uint64(k[2:])), m, err)
	})
	if err != nil {
		return fmt.Errorf("index: files: %w", err)
	}
	return nil
}

// EachSnapshot calls fn with every snapshot row: the id its key names,
// the record and the error decoding it.
func (db *DB) EachSnapshot(ctx context.Context, fn func(id SnapshotID, s Snapshot, err error) error) error {
	err := db.scan(ctx, prefixSnap, true, func(k, v []byte) error {
		if len(k) != len(prefixSnap)+8 {
			return fn(0, Snapshot{}, fmt.Errorf("%w: snapshot key %x", ErrDecode, k))
		}
		id := SnapshotID(binary.BigEndian.Uint64(k[len(prefixSnap):]))
		var s Snapshot
		err := s.UnmarshalBinary(v)
		if err == nil && s.ID != id {
			err = fmt.Errorf("%w: row of snapshot %d holds snapshot %d", ErrDecode, id, s.ID)
		}
		return fn(id, s, err)
	})
	if err != nil {
		return fmt.Errorf("index: snapshots: %w", err)
	}
	return nil
}

// TreeBytes returns the stored encoding of tree h as it is, unchecked: a
// checker compares its hash and decodes it itself.
func (db *DB) TreeBytes(h TreeHash) ([]byte, error) {
	var b []byte
	err := db.view(func(txn *badger.Txn) (err error) {
		b, err = getValue(txn, treeKey(h))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("index: tree %s: %w", h, err)
	}
	return b, nil
}
