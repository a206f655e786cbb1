package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	badger "github.com/dgraph-io/badger/v4"
)

// The hold rows' stamp (see holds.go): m/holds is the snapshot state the
// rows are complete for, as the number of snapshots and the next snapshot
// id. Any creation raises the next id for good (ids are never reused), so
// a state never comes back once left: deletions alone lower the count,
// and the count only rises again with creations. A build that changes
// snapshots without the rows (they predate them) leaves the stamp behind,
// whatever it did.

// holdStamp is the snapshot state the rows are valid for.
type holdStamp struct {
	count uint64     // existing snapshots
	next  SnapshotID // next id to allocate
}

func (s holdStamp) bytes() []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, s.count), uint64(s.next))
}

// readStamp returns the stamp in txn; ok is false without one (a store
// whose snapshots predate the rows, or an empty marker from a build that
// kept rows without a stamp).
func readStamp(txn *badger.Txn) (holdStamp, bool, error) {
	b, err := getValue(txn, keyHolds)
	if errors.Is(err, ErrNotFound) {
		return holdStamp{}, false, nil
	} else if err != nil {
		return holdStamp{}, false, err
	}
	if len(b) != 16 {
		return holdStamp{}, false, nil
	}
	return holdStamp{count: beUint64(b), next: SnapshotID(beUint64(b[8:]))}, true, nil
}

// snapState counts the snapshots in txn (their keys only) and reads the
// next id.
func snapState(ctx context.Context, txn *badger.Txn) (holdStamp, error) {
	next, err := nextSnapID(txn)
	if err != nil {
		return holdStamp{}, err
	}
	o := badger.DefaultIteratorOptions
	o.Prefix, o.PrefetchValues = prefixSnap, false
	it := txn.NewIterator(o)
	defer it.Close()
	st := holdStamp{next: next}
	for it.Rewind(); it.Valid(); it.Next() {
		if st.count%1024 == 0 {
			if err := ctxErr(ctx); err != nil {
				return holdStamp{}, err
			}
		}
		st.count++
	}
	return st, nil
}

// trustHolds compares the stamp with the snapshot state, once, at Open:
// badger locks its directory, so until Close only this DB changes the
// snapshots, and each change keeps the stamp (or drops it) in its own
// transaction.
func (db *DB) trustHolds() error {
	return db.view(func(txn *badger.Txn) error {
		st, ok, err := readStamp(txn)
		if err != nil || !ok {
			return err
		}
		now, err := snapState(context.Background(), txn)
		if err == nil && now == st {
			db.setTrusted(&st)
		}
		return err
	})
}

// trusted returns the stamp the rows are known valid for (nil: none).
func (db *DB) trusted() *holdStamp {
	db.holdMu.Lock()
	defer db.holdMu.Unlock()
	return db.holds
}

func (db *DB) setTrusted(st *holdStamp) {
	db.holdMu.Lock()
	defer db.holdMu.Unlock()
	db.holds = st
}

// rowsValid reports whether txn's rows can be trusted: its stamp is the
// one this DB knows valid. A change committing meanwhile makes them
// differ until the DB learns the new stamp, which only sends a reader to
// the reference sets.
func (db *DB) rowsValid(txn *badger.Txn) (holdStamp, bool, error) {
	st, ok, err := readStamp(txn)
	if err != nil || !ok {
		return st, false, err
	}
	t := db.trusted()
	return st, t != nil && *t == st, nil
}

// HoldsComplete reports whether the hold rows match the snapshots (their
// stamp is the snapshots' state); without them EachHolder answers
// nothing. RebuildHolds makes them complete again.
func (db *DB) HoldsComplete() (bool, error) {
	var ok bool
	err := db.view(func(txn *badger.Txn) (err error) {
		_, ok, err = db.rowsValid(txn)
		return err
	})
	return ok, err
}

// RebuildHolds rewrites every hold row from the reference sets when they
// are not complete (a store whose snapshots predate them, or that a build
// without them changed since), and stamps them. It reads every snapshot's
// set once and writes a row per file and change, so the offline passes
// that already read the whole store (gc, repack) call it. A snapshot
// change meanwhile leaves the rows unstamped (and the next call rebuilds
// again); so does a crash, the rows cleared first.
func (db *DB) RebuildHolds(ctx context.Context) error {
	if ok, err := db.HoldsComplete(); err != nil || ok {
		return err
	}
	if err := db.rebuildHolds(ctx); err != nil {
		return fmt.Errorf("index: rebuild hold rows: %w", err)
	}
	return nil
}

func (db *DB) rebuildHolds(ctx context.Context) error {
	var before holdStamp
	err := db.view(func(txn *badger.Txn) (err error) {
		before, err = snapState(ctx, txn)
		return err
	})
	if err != nil {
		return err
	}
	if err := db.update(func(txn *badger.Txn) error { return txn.Delete(keyHolds) }); err != nil {
		return err
	}
	if err := db.clearHolds(ctx); err != nil {
		return err
	}
	if err := db.writeAllHolds(ctx); err != nil {
		return err
	}
	return db.update(func(txn *badger.Txn) error {
		now, err := snapState(ctx, txn)
		if err != nil || now != before {
			return err // changed meanwhile: stay unstamped
		}
		if err := txn.Set(keyHolds, now.bytes()); err != nil {
			return err
		}
		db.setTrusted(&now) // harmless if the commit fails: no stamp matches it
		return nil
	})
}

// clearHolds deletes every row and list.
func (db *DB) clearHolds(ctx context.Context) error {
	for _, p := range [][]byte{prefixHold, prefixHoldSet} {
		var dels []kv
		err := db.scan(ctx, p, false, func(k, _ []byte) error {
			dels = append(dels, kv{k: append([]byte{}, k...)})
			return nil
		})
		if err == nil {
			err = db.writeBatch(dels)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeAllHolds writes each snapshot's rows for the files whose held
// revisions differ from its predecessor's.
func (db *DB) writeAllHolds(ctx context.Context) error {
	held := map[FileID][]Rev{}
	prev := NewRefs()
	var out []kv
	err := db.EachSnapshotRefs(ctx, func(id SnapshotID, refs *Refs) error {
		toggled := refs.Clone()
		toggled.Xor(prev)
		byFile := map[FileID][]Rev{}
		for it := toggled.Iterator(); it.HasNext(); {
			r := RefID(it.Next())
			byFile[r.File] = append(byFile[r.File], r.Rev)
		}
		files := slices.Sorted(maps.Keys(byFile))
		for _, f := range files {
			revs := nextHeld(held[f], byFile[f], refs, f)
			if len(revs) == 0 {
				delete(held, f)
			} else {
				held[f] = revs
			}
			out = append(out, kv{k: holdKey(f, id), v: appendSorted(nil, revs)})
		}
		if len(files) > 0 {
			out = append(out, kv{k: holdSetKey(id), v: appendSorted(nil, files)})
		}
		prev = refs.Clone()
		if len(out) >= holdTxnRows {
			err := db.writeBatch(out)
			out = out[:0]
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return db.writeBatch(out)
}
