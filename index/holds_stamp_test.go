package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// oldCreate records a snapshot the way builds before the hold rows did:
// the record, name, reference set and next id, no row and no stamp.
func oldCreate(t *testing.T, db *DB, name string, refs *Refs) {
	t.Helper()
	rb, err := encodeRefs(refs)
	if err != nil {
		t.Fatal(err)
	}
	err = db.bdb.Update(func(txn *badger.Txn) error {
		id, err := nextSnapID(txn)
		if err != nil {
			return err
		}
		s := Snapshot{ID: id, Name: name, Root: dirEntry(TreeHash{1})}
		rec, _ := s.MarshalBinary()
		return setAll(txn,
			keyNextSnap, binary.BigEndian.AppendUint64(nil, uint64(id)+1),
			snapKey(id), rec,
			snapNameKey(name), binary.BigEndian.AppendUint64(nil, uint64(id)),
			snapRefsKey(id), rb)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// oldDelete deletes a snapshot the way those builds did: its record,
// name and reference set; its rows stay.
func oldDelete(t *testing.T, db *DB, name string) {
	t.Helper()
	err := db.bdb.Update(func(txn *badger.Txn) error {
		s, err := snapshotByName(txn, name)
		if err != nil {
			return err
		}
		for _, k := range [][]byte{snapNameKey(name), snapKey(s.ID), snapRefsKey(s.ID)} {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// openReopenable opens an index in a fresh directory; reopen closes it
// and opens it again (as one process exits and the next opens the store)
// and returns the new handle. The last one is closed at cleanup.
func openReopenable(t *testing.T) (db *DB, reopen func() *DB) {
	t.Helper()
	dir := t.TempDir()
	reopen = func() *DB {
		t.Helper()
		if db != nil {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if db, err = Open(dir, Options{}); err != nil {
			t.Fatal(err)
		}
		return db
	}
	t.Cleanup(func() {
		if db != nil {
			db.Close()
		}
	})
	return reopen(), reopen
}

// refsFor is the reference set of a tree whose files hold the revisions
// in cur.
func refsFor(cur map[FileID][]Rev) *Refs {
	r := NewRefs()
	for f, rs := range cur {
		for _, rev := range rs {
			r.Add(uint64(rev)<<32 | uint64(f))
		}
	}
	return r
}

// checkFallback asserts that EachHolder refuses to answer from rows.
func checkFallback(t *testing.T, db *DB, step string) {
	t.Helper()
	list := snapList(t, db)
	ok, err := db.EachHolder(context.Background(), 1, list, func(int, Rev) { t.Fatalf("%s: answered from rows", step) })
	if ok || err != nil {
		t.Fatalf("%s: EachHolder on stale rows: ok %v, %v", step, ok, err)
	}
	err = db.CheckHolds(context.Background(), func(m HoldMismatch) {
		t.Fatalf("%s: CheckHolds checked stale rows: %+v", step, m)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHoldStampOlderBuilds interleaves this build's snapshot changes with
// an older build's (record only, the store closed and reopened around
// them, as two processes take turns) and rebuilds: after any older
// change the rows are distrusted until a rebuild or until no snapshot is
// left, and whenever trusted they answer exactly as the reference sets.
func TestHoldStampOlderBuilds(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	db, reopen := openReopenable(t)
	const files, revs = 8, 5
	cur := map[FileID][]Rev{}
	n := 0
	for step := range 250 {
		name := fmt.Sprintf("step %d", step)
		list := snapList(t, db)
		for range 1 + rng.IntN(3) {
			f := FileID(1 + rng.IntN(files))
			if rng.IntN(4) == 0 {
				delete(cur, f)
			} else {
				cur[f] = []Rev{Rev(rng.IntN(revs)), Rev(rng.IntN(revs))}
			}
		}
		old := false
		switch op := rng.IntN(12); {
		case op < 4 || len(list) == 0 && op < 10:
			n++
			if _, err := db.CreateSnapshot(&Snapshot{Name: fmt.Sprintf("s%d", n), Root: dirEntry(TreeHash{1})}, refsFor(cur), nil); err != nil {
				t.Fatal(err)
			}
		case op < 6:
			if err := db.DeleteSnapshot(list[rng.IntN(len(list))].Name); err != nil {
				t.Fatal(err)
			}
		case op < 8:
			n++
			oldCreate(t, db, fmt.Sprintf("o%d", n), refsFor(cur))
			old = true
		case op < 10:
			oldDelete(t, db, list[rng.IntN(len(list))].Name)
			old = true
		default:
			if err := db.RebuildHolds(context.Background()); err != nil {
				t.Fatal(err)
			}
			if ok, err := db.HoldsComplete(); err != nil || !ok {
				t.Fatalf("%s: after a rebuild: complete %v, %v", name, ok, err)
			}
		}
		if rng.IntN(3) == 0 || old {
			db = reopen()
		}
		ok, err := db.HoldsComplete()
		if err != nil {
			t.Fatal(err)
		}
		if old && ok {
			t.Fatalf("%s: rows trusted after an older build's change", name)
		}
		if ok {
			checkHolders(t, db, files, name)
		} else {
			checkFallback(t, db, name)
		}
	}
	if err := db.RebuildHolds(context.Background()); err != nil {
		t.Fatal(err)
	}
	db = reopen()
	checkHolders(t, db, files, "final rebuild")
}

// TestHoldStampReproduction is the review's case: a store of an older
// build, then this build's n1, the older build's o2, this build's n3:
// the rows are not trusted (the reference sets answer) until a rebuild,
// after which they are exact; an older build's deletion of the
// snapshot whose rows were its successor's answer is caught too.
func TestHoldStampReproduction(t *testing.T) {
	db, reopen := openReopenable(t)
	refs := func(revs ...Rev) *Refs {
		r := NewRefs()
		for _, rev := range revs {
			r.Add(uint64(rev)<<32 | 1)
		}
		return r
	}
	create := func(name string, r *Refs) {
		t.Helper()
		if _, err := db.CreateSnapshot(&Snapshot{Name: name, Root: dirEntry(TreeHash{1})}, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	oldCreate(t, db, "o0", refs(0))
	db = reopen()
	create("n1", refs(1))
	checkFallback(t, db, "n1 on an older store")
	if err := db.RebuildHolds(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkHolders(t, db, 1, "rebuilt")
	db = reopen()
	oldCreate(t, db, "o2", refs(2))
	db = reopen()
	checkFallback(t, db, "after o2")
	create("n3", refs(2))
	checkFallback(t, db, "after n3")
	if err := db.RebuildHolds(context.Background()); err != nil {
		t.Fatal(err)
	}
	db = reopen()
	if got := fmt.Sprint(holdersFromRows(t, db, 1)); got != "map[n1:[1] n3:[2] o0:[0] o2:[2]]" {
		t.Fatalf("rebuilt rows: %s", got)
	}
	// n3 has no row of its own (o2's was its answer): an older build's
	// deletion of o2 would leave n3 without one.
	oldDelete(t, db, "o2")
	db = reopen()
	checkFallback(t, db, "after o2's older deletion")
	// An empty marker, as a build without the stamp wrote, is no stamp.
	if err := db.RebuildHolds(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.bdb.Update(func(txn *badger.Txn) error { return txn.Set(keyHolds, nil) }); err != nil {
		t.Fatal(err)
	}
	db = reopen()
	checkFallback(t, db, "empty marker")
	for _, s := range snapList(t, db) { // with no snapshot left, rows start over
		if err := db.DeleteSnapshot(s.Name); err != nil {
			t.Fatal(err)
		}
	}
	create("n4", refs(3))
	db = reopen()
	checkHolders(t, db, 1, "after starting over")
}
