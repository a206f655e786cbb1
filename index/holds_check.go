package index

import (
	"context"
	"errors"
	"fmt"
	"slices"

	badger "github.com/dgraph-io/badger/v4"
)

// HoldMismatch is a file whose hold rows disagree with a snapshot's
// reference set: Rows is what they say the snapshot holds of the file,
// Refs what the set says.
type HoldMismatch struct {
	Snapshot Snapshot
	File     FileID
	Rows     []Rev
	Refs     []Rev
	Err      error // a row or list that does not decode (Rows then nil)
}

// CheckHolds walks every snapshot in creation order and calls fn for each
// file whose held revisions, as the rows give them, differ from the
// snapshot's reference set. It compares only the files that changed from
// one snapshot to the next (by either account), so it costs one decode
// and one XOR per snapshot plus the rows. Without complete rows
// (HoldsComplete) it checks nothing.
func (db *DB) CheckHolds(ctx context.Context, fn func(HoldMismatch)) error {
	if ok, err := db.HoldsComplete(); err != nil || !ok {
		return err
	}
	var snaps []Snapshot
	if err := db.Snapshots(ctx, func(s Snapshot) error { snaps = append(snaps, s); return nil }); err != nil {
		return err
	}
	rows := map[FileID][]Rev{} // per file, as the rows have it so far
	truth := map[FileID][]Rev{}
	prev := NewRefs()
	for _, s := range snaps {
		if err := ctxErr(ctx); err != nil {
			return err
		}
		refs, err := db.SnapshotRefs(s.ID)
		if err != nil {
			return err
		}
		check, err := db.applyRows(s, rows, fn)
		if err != nil {
			return err
		}
		toggled := refs.Clone()
		toggled.Xor(prev)
		for it := toggled.Iterator(); it.HasNext(); {
			r := RefID(it.Next())
			if refs.Contains(uint64(r.Rev)<<32 | uint64(r.File)) {
				truth[r.File] = append(truth[r.File], r.Rev)
			} else {
				truth[r.File] = slices.DeleteFunc(truth[r.File], func(x Rev) bool { return x == r.Rev })
			}
			check[r.File] = true
		}
		for f := range check {
			slices.Sort(truth[f])
			if fmt.Sprint(rows[f]) != fmt.Sprint(truth[f]) {
				fn(HoldMismatch{Snapshot: s, File: f, Rows: slices.Clone(rows[f]), Refs: slices.Clone(truth[f])})
			}
		}
		prev = refs
	}
	return nil
}

// applyRows reads snapshot s's rows into rows and returns the files they
// name; rows that do not decode go to fn.
func (db *DB) applyRows(s Snapshot, rows map[FileID][]Rev, fn func(HoldMismatch)) (map[FileID]bool, error) {
	check := map[FileID]bool{}
	err := db.view(func(txn *badger.Txn) error {
		files, err := holdFiles(txn, s.ID)
		if err != nil {
			fn(HoldMismatch{Snapshot: s, Err: fmt.Errorf("hold list: %w", err)})
			return nil
		}
		for _, f := range files {
			v, err := getValue(txn, holdKey(f, s.ID))
			if errors.Is(err, ErrNotFound) {
				continue // a list may name a row not written yet (see holds.go)
			} else if err != nil {
				return err
			}
			revs, err := readSorted[Rev](nil, v, 1<<32-1)
			if err != nil {
				fn(HoldMismatch{Snapshot: s, File: f, Err: fmt.Errorf("hold row: %w", err)})
				continue
			}
			rows[f], check[f] = revs, true
		}
		return nil
	})
	return check, err
}
