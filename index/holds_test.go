package index

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// holdersFromRows is what EachHolder says of file f: per snapshot name,
// the revisions it holds.
func holdersFromRows(t *testing.T, db *DB, f FileID) map[string][]Rev {
	t.Helper()
	list := snapList(t, db)
	got := map[string][]Rev{}
	ok, err := db.EachHolder(context.Background(), f, list, func(i int, r Rev) {
		got[list[i].Name] = append(got[list[i].Name], r)
	})
	if err != nil || !ok {
		t.Fatalf("EachHolder(%d): ok %v, %v", f, ok, err)
	}
	return got
}

// holdersFromRefs is the same answer from every snapshot's reference set.
func holdersFromRefs(t *testing.T, db *DB, f FileID) map[string][]Rev {
	t.Helper()
	want := map[string][]Rev{}
	for _, s := range snapList(t, db) {
		r, err := db.SnapshotRefs(s.ID)
		if err != nil {
			t.Fatal(err)
		}
		for it := r.Iterator(); it.HasNext(); {
			if id := RefID(it.Next()); id.File == f {
				want[s.Name] = append(want[s.Name], id.Rev)
			}
		}
		slices.Sort(want[s.Name])
	}
	return want
}

func snapList(t *testing.T, db *DB) []Snapshot {
	t.Helper()
	var l []Snapshot
	if err := db.Snapshots(context.Background(), func(s Snapshot) error { l = append(l, s); return nil }); err != nil {
		t.Fatal(err)
	}
	return l
}

func checkHolders(t *testing.T, db *DB, files int, step string) {
	t.Helper()
	err := db.CheckHolds(context.Background(), func(m HoldMismatch) {
		t.Fatalf("%s: CheckHolds: snapshot %s file %d: rows %v, refs %v, %v", step, m.Snapshot.Name, m.File, m.Rows, m.Refs, m.Err)
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := FileID(1); f <= FileID(files); f++ {
		got, want := holdersFromRows(t, db, f), holdersFromRefs(t, db, f)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: file %d: rows say %v, reference sets %v", step, f, got, want)
		}
	}
}

// TestHoldRowsMatchReferenceSets runs random creations, deletions and
// renames and compares, after each, every file's holders from its rows
// with those the reference sets give.
func TestHoldRowsMatchReferenceSets(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	db := openSnapDB(t)
	const files, revs = 12, 6
	cur := map[FileID][]Rev{} // the tree's files as of the next snapshot
	n := 0
	for step := range 300 {
		list := snapList(t, db)
		switch op := rng.IntN(10); {
		case op < 6 || len(list) == 0:
			for range 1 + rng.IntN(4) {
				f := FileID(1 + rng.IntN(files))
				switch rng.IntN(4) {
				case 0:
					delete(cur, f) // the file leaves the tree
				case 1: // two names hold two revisions of one file
					cur[f] = []Rev{Rev(rng.IntN(revs)), Rev(rng.IntN(revs))}
				default:
					cur[f] = []Rev{Rev(rng.IntN(revs))}
				}
			}
			n++
			if _, err := db.CreateSnapshot(&Snapshot{Name: fmt.Sprintf("s%d", n), Root: dirEntry(TreeHash{1})}, refsFor(cur), nil); err != nil {
				t.Fatal(err)
			}
		case op < 9:
			if err := db.DeleteSnapshot(list[rng.IntN(len(list))].Name); err != nil {
				t.Fatal(err)
			}
		default:
			n++
			if err := db.RenameSnapshot(list[rng.IntN(len(list))].Name, fmt.Sprintf("r%d", n)); err != nil {
				t.Fatal(err)
			}
		}
		checkHolders(t, db, files, fmt.Sprintf("step %d", step))
	}
}

// TestHoldRowsLargeSnapshot takes snapshots whose rows exceed one
// transaction (written in batches) and deletes them.
func TestHoldRowsLargeSnapshot(t *testing.T) {
	db := openSnapDB(t)
	const files = 3 * holdTxnRows
	r := NewRefs()
	for f := 1; f <= files; f++ {
		r.Add(uint64(f))
	}
	mk := func(name string, r *Refs) {
		if _, err := db.CreateSnapshot(&Snapshot{Name: name, Root: dirEntry(TreeHash{1})}, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	mk("a", r)
	mk("b", r)
	r2 := NewRefs()
	for f := 1; f <= files; f++ {
		r2.Add(1<<32 | uint64(f))
	}
	mk("c", r2)
	for _, f := range []FileID{1, files / 2, files} {
		if got := fmt.Sprint(holdersFromRows(t, db, f)); got != "map[a:[0] b:[0] c:[1]]" {
			t.Fatalf("file %d: %s", f, got)
		}
	}
	if err := db.DeleteSnapshot("a"); err != nil { // a's rows move to b
		t.Fatal(err)
	}
	if err := db.DeleteSnapshot("c"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []FileID{1, files / 2, files} {
		if got := fmt.Sprint(holdersFromRows(t, db, f)); got != "map[b:[0]]" {
			t.Fatalf("file %d after deletes: %s", f, got)
		}
	}
}

// TestHoldRowsAbsentInOlderStores: a store whose snapshots have no rows
// (as written before them) answers ok=false until no snapshot is left,
// then keeps rows from its next snapshot on.
func TestHoldRowsAbsentInOlderStores(t *testing.T) {
	db := openSnapDB(t)
	r := NewRefs()
	r.Add(1)
	mk := func(name string) {
		if _, err := db.CreateSnapshot(&Snapshot{Name: name, Root: dirEntry(TreeHash{1})}, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	mk("old")
	// Make it an older store: no marker, no rows.
	err := db.bdb.Update(func(txn *badger.Txn) error {
		for _, k := range [][]byte{keyHolds, holdKey(1, 1), holdSetKey(1)} {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mk("older-too")
	list := snapList(t, db)
	if ok, err := db.EachHolder(context.Background(), 1, list, func(int, Rev) { t.Fatal("called") }); ok || err != nil {
		t.Fatalf("EachHolder on an older store: ok %v, %v", ok, err)
	}
	for _, s := range list {
		if err := db.DeleteSnapshot(s.Name); err != nil {
			t.Fatal(err)
		}
	}
	mk("new")
	if got := fmt.Sprint(holdersFromRows(t, db, 1)); got != "map[new:[0]]" {
		t.Fatalf("after the older snapshots went: %s", got)
	}
}

// FuzzReadSorted feeds the decoder of hold rows and lists arbitrary
// bytes: an error or a strictly increasing list whose encoding decodes
// to the same list (varints need not be minimal), never a panic.
func FuzzReadSorted(f *testing.F) {
	f.Add(appendSorted(nil, []Rev{0, 3, 9}))
	f.Add(appendSorted(nil, []FileID{1, 1 << 40}))
	f.Add([]byte{0})
	f.Add([]byte{2, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		revs, err := readSorted[Rev](nil, b, 1<<32-1)
		if err != nil {
			return
		}
		for i := 1; i < len(revs); i++ {
			if revs[i] <= revs[i-1] {
				t.Fatalf("not increasing: %v", revs)
			}
		}
		again, err := readSorted[Rev](nil, appendSorted(nil, revs), 1<<32-1)
		if err != nil || fmt.Sprint(again) != fmt.Sprint(revs) {
			t.Fatalf("%x decodes to %v, whose encoding decodes to %v, %v", b, revs, again, err)
		}
	})
}

// TestCheckHoldsFindsDamage changes a row and a list behind the index's
// back: CheckHolds names the snapshot and file of each.
func TestCheckHoldsFindsDamage(t *testing.T) {
	db := openSnapDB(t)
	r := NewRefs()
	r.Add(1)
	r.Add(2)
	for _, name := range []string{"a", "b"} {
		if _, err := db.CreateSnapshot(&Snapshot{Name: name, Root: dirEntry(TreeHash{1})}, r, nil); err != nil {
			t.Fatal(err)
		}
		r.Add(1<<32 | 2)
	}
	damage := func(k, v []byte) {
		if err := db.bdb.Update(func(txn *badger.Txn) error { return txn.Set(k, v) }); err != nil {
			t.Fatal(err)
		}
	}
	damage(holdKey(1, 1), appendSorted(nil, []Rev{5}))
	damage(holdSetKey(2), []byte{9})
	var got []string
	err := db.CheckHolds(context.Background(), func(m HoldMismatch) {
		got = append(got, fmt.Sprintf("%s/%d rows %v refs %v err %v", m.Snapshot.Name, m.File, m.Rows, m.Refs, m.Err != nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "[a/1 rows [5] refs [0] err false b/0 rows [] refs [] err true b/2 rows [0] refs [0 1] err false]"
	if fmt.Sprint(got) != want {
		t.Fatalf("CheckHolds reported %v\nwant %s", got, want)
	}
}
