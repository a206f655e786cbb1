package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func encodeSum(b []byte) []byte { return binary.BigEndian.AppendUint64(nil, xxhash.Sum64(b)) }

func openSnapDB(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func dirEntry(h TreeHash) TreeEntry {
	return TreeEntry{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Tree: h}
}

func TestSnapshotCRUD(t *testing.T) {
	db := openSnapDB(t)
	tr := sampleTree()
	b, h, _ := tr.Encode()
	if err := db.PutTrees(map[TreeHash][]byte{h: b}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Tree(h)
	if err != nil || len(got.Entries) != len(tr.Entries) {
		t.Fatalf("Tree: %v, %v", got, err)
	}
	if _, err := db.Tree(TreeHash{42}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing tree: %v", err)
	}
	refs := NewRefs()
	refs.Add(7)
	for i, name := range []string{"one", "two", "three"} {
		s := Snapshot{Name: name, Time: int64(i), Root: dirEntry(h)}
		id, err := db.CreateSnapshot(&s, refs, nil)
		if err != nil || id != SnapshotID(i+1) {
			t.Fatalf("create %s: id %d, %v", name, id, err)
		}
	}
	if _, err := db.CreateSnapshot(&Snapshot{Name: "two", Root: dirEntry(h)}, refs, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate name: %v", err)
	}
	if _, err := db.CreateSnapshot(&Snapshot{Name: "a/b", Root: dirEntry(h)}, refs, nil); !errors.Is(err, ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	if err := db.RenameSnapshot("two", "deux"); err != nil {
		t.Fatal(err)
	}
	if err := db.RenameSnapshot("one", "three"); !errors.Is(err, ErrExists) {
		t.Fatalf("rename onto a taken name: %v", err)
	}
	if err := db.RenameSnapshot("nope", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rename of a missing snapshot: %v", err)
	}
	if err := db.DeleteSnapshot("one"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteSnapshot("one"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	var names []string
	db.Snapshots(context.Background(), func(s Snapshot) error { names = append(names, fmt.Sprint(s.ID, s.Name)); return nil })
	if fmt.Sprint(names) != "[2deux 3three]" {
		t.Fatalf("listing %v", names)
	}
	s, err := db.Snapshot("deux")
	if err != nil || s.ID != 2 || s.Root.Tree != h {
		t.Fatalf("Snapshot(deux) = %+v, %v", s, err)
	}
	last, ok, err := db.LatestSnapshot()
	if err != nil || !ok || last.Name != "three" {
		t.Fatalf("latest = %+v %v %v", last, ok, err)
	}
	r, err := db.SnapshotRefs(3)
	if err != nil || !r.Contains(7) || r.GetCardinality() != 1 {
		t.Fatalf("refs %v, %v", r, err)
	}
	// A deleted snapshot's id is not reused.
	db.DeleteSnapshot("three")
	id, err := db.CreateSnapshot(&Snapshot{Name: "four", Root: dirEntry(h)}, refs, nil)
	if err != nil || id != 4 {
		t.Fatalf("id after delete = %d, %v", id, err)
	}
}

// TestDiffRefs checks the incremental reference set against a full walk,
// and that the diff loads only the trees that differ.
func TestDiffRefs(t *testing.T) {
	db := openSnapDB(t)
	put := func(tr *Tree) TreeHash {
		tr.Sort()
		b, h, err := tr.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := db.PutTrees(map[TreeHash][]byte{h: b}); err != nil {
			t.Fatal(err)
		}
		return h
	}
	file := func(name string, f FileID, r Rev, ino uint64) TreeEntry {
		return TreeEntry{Name: name, Mode: syscall.S_IFREG | 0o644, Rev: RevID{File: f, Rev: r}, Ino: ino}
	}
	sub := func(name string, h TreeHash) TreeEntry { e := dirEntry(h); e.Name = name; return e }
	big := &Tree{}
	for i := range 100 {
		big.Entries = append(big.Entries, file(fmt.Sprintf("f%03d", i), FileID(10+i), 0, uint64(10+i)))
	}
	bigH := put(big)
	oldA := put(&Tree{Entries: []TreeEntry{file("x", 1, 0, 1), file("link1", 2, 3, 2)}})
	oldB := put(&Tree{Entries: []TreeEntry{file("link2", 2, 3, 2), file("gone", 3, 1, 3)}})
	oldRoot := put(&Tree{Entries: []TreeEntry{sub("a", oldA), sub("b", oldB), sub("big", bigH)}})
	// Later: x changes revision, link1 is removed (link2 remains, its
	// nlink changed so b is rewritten), gone is removed, y is new.
	newA := put(&Tree{Entries: []TreeEntry{file("x", 1, 1, 1), file("y", 4, 0, 4)}})
	newB := put(&Tree{Entries: []TreeEntry{{Name: "link2", Mode: syscall.S_IFREG | 0o644, Rev: RevID{File: 2, Rev: 3}, Ino: 2, Nlink: 1}}})
	newRoot := put(&Tree{Entries: []TreeEntry{sub("a", newA), sub("b", newB), sub("big", bigH)}})

	full := func(root TreeHash) *Refs {
		d, err := DiffRefs(db.Tree, TreeHash{}, root)
		if err != nil {
			t.Fatal(err)
		}
		return d.Added
	}
	d, err := DiffRefs(db.Tree, oldRoot, newRoot)
	if err != nil {
		t.Fatal(err)
	}
	if d.Trees != 6 { // two roots, two a, two b; big is shared and skipped
		t.Fatalf("diff loaded %d trees, want 6", d.Trees)
	}
	got, want := d.Apply(full(oldRoot)), full(newRoot)
	if !got.Equals(want) {
		t.Fatalf("incremental refs %v, full walk %v", got.ToArray(), want.ToArray())
	}
	k, _ := RefKey(RevID{File: 2, Rev: 3})
	if !got.Contains(k) {
		t.Fatal("a revision still held by a hard link was dropped")
	}
	if _, err := RefKey(RevID{File: 1 << 32}); err == nil {
		t.Fatal("RefKey accepted a file beyond 2^32")
	}
	if id := RefID(k); id != (RevID{File: 2, Rev: 3}) {
		t.Fatalf("RefID(RefKey) = %v", id)
	}
}
