package index

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// DeleteEntries removes the entries es (their revision rows and the
// content-hash rows of those with data of their own), in one transaction.
// The garbage collector calls it for revisions it removed, once the
// revisions it keeps no longer need them; their file records stay, so a
// file's revision numbers are never reused. Deleting an entry that is
// already gone changes nothing, so a switch repeated after a crash may
// delete again.
func (db *DB) DeleteEntries(es []Entry) error {
	if len(es) == 0 {
		return nil
	}
	err := db.update(func(txn *badger.Txn) error {
		for i := range es {
			e := &es[i]
			if err := txn.Delete(revKey(e.ID())); err != nil {
				return err
			}
			if !e.HashIndexed() {
				continue
			}
			if err := txn.Delete(hashKey(e.Hash, e.ID())); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index: delete %d entries: %w", len(es), err)
	}
	return nil
}

// SnapshotRefsAll calls fn with every snapshot and its reference set, in
// creation order.
func (db *DB) SnapshotRefsAll(fn func(Snapshot, *Refs) error) error {
	var snaps []Snapshot
	if err := db.Snapshots(nil, func(s Snapshot) error { snaps = append(snaps, s); return nil }); err != nil {
		return err
	}
	for _, s := range snaps {
		r, err := db.SnapshotRefs(s.ID)
		if err != nil {
			return err
		}
		if err := fn(s, r); err != nil {
			return err
		}
	}
	return nil
}
