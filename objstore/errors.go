package objstore

import (
	"errors"
	"fmt"

	"github.com/deltafs/deltafs/index"
)

var (
	// ErrCorrupt matches every error caused by bad stored bytes.
	ErrCorrupt = errors.New("corrupt store data")
	// ErrNotFound matches a revision or file that does not exist.
	ErrNotFound = index.ErrNotFound
	// ErrReadOnly is returned by writes to a store opened read-only.
	ErrReadOnly = errors.New("store is read-only")
	// ErrClosed is returned by calls on a closed store.
	ErrClosed = errors.New("store is closed")
)

// CorruptError says which revision could not be read and which record was
// bad. errors.Is(err, ErrCorrupt) matches it.
type CorruptError struct {
	Rev    index.RevID // the revision being read
	Record index.RevID // the revision whose record (or result) was bad
	Seg    uint32
	Off    uint64
	Err    error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("objstore: revision %d of file %d unreadable: record of %v in segment %d at %d: %v",
		e.Rev.Rev, e.Rev.File, e.Record, e.Seg, e.Off, e.Err)
}

func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

func corrupt(rev index.RevID, rec *index.Entry, err error) error {
	return &CorruptError{Rev: rev, Record: rec.ID(), Seg: rec.Seg, Off: rec.Off, Err: err}
}
