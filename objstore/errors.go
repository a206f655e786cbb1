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
	// ErrLost matches a read of a revision whose data a salvage found
	// lost to damage (index.FlagLost), or of one built on such a
	// revision; it matches ErrCorrupt too (a read of it is an I/O error).
	ErrLost = errors.New("data lost to damage")
)

// LostError says which revision could not be read and which lost
// revision it needs. errors.Is(err, ErrLost) and errors.Is(err,
// ErrCorrupt) match it.
type LostError struct {
	Rev  index.RevID // the revision being read
	Lost index.RevID // the lost revision it needs (Rev itself, or a base)
}

func (e *LostError) Error() string {
	if e.Rev == e.Lost {
		return fmt.Sprintf("objstore: revision %d of file %d was lost to damage: a salvage kept its place in the history, not its content",
			e.Rev.Rev, e.Rev.File)
	}
	return fmt.Sprintf("objstore: revision %d of file %d unreadable: it is built on %v, lost to damage", e.Rev.Rev, e.Rev.File, e.Lost)
}

func (e *LostError) Unwrap() []error { return []error{ErrLost, ErrCorrupt} }

// lostCheck returns a LostError if e's data is lost; want is the revision
// being read.
func lostCheck(want index.RevID, e *index.Entry) error {
	if e.Lost() {
		return &LostError{Rev: want, Lost: e.ID()}
	}
	return nil
}

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
