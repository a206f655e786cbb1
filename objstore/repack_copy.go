package objstore

import (
	"errors"
	"fmt"
	"iter"

	"github.com/deltafs/deltafs/index"
)

// The switch walks the live and the shadow index side by side, each in
// key order with one iterator, rather than looking every file and entry
// of one up in the other: on a store of many small files (R3: 10,000
// files, 20,000 revisions) the lookups cost more than the copy.

// errStopPull ends a pulled scan early.
var errStopPull = errors.New("stop")

// pull turns a callback scan into a pull iterator. The scan's error, if
// any, is in *err once next has returned false.
func pull[T any](scan func(fn func(T) error) error, err *error) (next func() (T, bool), stop func()) {
	return iter.Pull(func(yield func(T) bool) {
		e := scan(func(v T) error {
			if !yield(v) {
				return errStopPull
			}
			return nil
		})
		if e != nil && !errors.Is(e, errStopPull) {
			*err = e
		}
	})
}

type fileRow struct {
	id   index.FileID
	meta index.FileMeta
}

func fileRows(db *index.DB) func(fn func(fileRow) error) error {
	return func(fn func(fileRow) error) error {
		return db.Files(nil, func(f index.FileID, m index.FileMeta) error { return fn(fileRow{f, m}) })
	}
}

func entryRows(db *index.DB) func(fn func(index.Entry) error) error {
	return func(fn func(index.Entry) error) error { return db.All(nil, fn) }
}

// checkComplete refuses a shadow that lacks a revision of the live store:
// SWITCH is only written once the shadow holds all of them.
func checkComplete(ldb, sdb *index.DB) error {
	var serr error
	next, stop := pull(fileRows(sdb), &serr)
	defer stop()
	s, ok := next()
	err := ldb.Files(nil, func(f index.FileID, lm index.FileMeta) error {
		for ok && s.id < f {
			s, ok = next()
		}
		if lm.Revs == 0 {
			return nil
		}
		if !ok || s.id != f || s.meta.Revs != lm.Revs {
			var have uint32
			if ok && s.id == f {
				have = s.meta.Revs
			}
			return fmt.Errorf("%w: shadow has %d of the %d revisions of file %d", ErrCorrupt, have, lm.Revs, f)
		}
		return nil
	})
	return errors.Join(err, serr)
}

// copyMerged adds to b every shadow file record whose snapshot facts
// differ from the live one, and every shadow entry the live index does
// not hold as it is (kept whole, see repack_keep.go), flushing b every
// switchChunk entries. A dedup entry takes the chain facts of its
// target's new entry (its target may be in a file done after it).
func copyMerged(ldb, sdb *index.DB, b *index.Batch, flush func() error) error {
	var lerr error
	nextFile, stopFiles := pull(fileRows(ldb), &lerr)
	defer stopFiles()
	l, lok := nextFile()
	err := sdb.Files(nil, func(f index.FileID, sm index.FileMeta) error {
		for lok && l.id < f {
			l, lok = nextFile()
		}
		if !lok || l.id != f {
			return fmt.Errorf("%w: file %d of the shadow is not in the store", ErrCorrupt, f)
		}
		if lm := l.meta; lm.LastSnap != sm.LastSnap || lm.HasSnap != sm.HasSnap {
			lm.LastSnap, lm.HasSnap = sm.LastSnap, sm.HasSnap
			b.Files[f] = lm
		}
		return nil
	})
	if err = errors.Join(err, lerr); err != nil {
		return err
	}
	nextEntry, stopEntries := pull(entryRows(ldb), &lerr)
	defer stopEntries()
	le, leok := nextEntry()
	err = sdb.All(nil, func(e index.Entry) error {
		if e.Kind == index.KindDedup {
			te, err := sdb.Entry(e.Base)
			if err != nil {
				return fmt.Errorf("dedup %v: %w", e.ID(), err)
			}
			e.ChainLen, e.ChainBytes, e.Seg, e.Off = te.ChainLen, te.ChainBytes, te.Seg, te.Off
		}
		for leok && (le.File < e.File || le.File == e.File && le.Rev < e.Rev) {
			le, leok = nextEntry()
		}
		if leok && le == e {
			return nil
		}
		if leok && le.ID() == e.ID() && le.HashIndexed() && (!e.HashIndexed() || le.Hash != e.Hash) {
			b.Unhash = append(b.Unhash, le) // a salvage found it lost
		}
		b.Entries = append(b.Entries, e)
		if len(b.Entries) >= switchChunk {
			return flush()
		}
		return nil
	})
	return errors.Join(err, lerr)
}
