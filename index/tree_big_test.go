package index

import (
	"fmt"
	"syscall"
	"testing"
)

// bigTree is the tree of a directory of n files with 30-byte names.
func bigTree(n int) *Tree {
	t := &Tree{}
	for i := range n {
		t.Entries = append(t.Entries, TreeEntry{Name: fmt.Sprintf("file-with-a-longish-name-%06d", i),
			Mode: syscall.S_IFREG | 0o644, Nlink: 1, Ino: uint64(100 + i), Size: 1, Mtime: int64(i), Rev: RevID{File: FileID(i + 1), Rev: 0}})
	}
	t.Sort()
	return t
}

// TestBigTrees: a directory's tree is one value; one of 40,000 entries
// (3 MB, past badger's value threshold) is stored through the value log,
// by PutTrees and by CreateSnapshot, and reads back after a reopen.
// (With 1 MiB value logs it was refused: "Value with size 3183494
// exceeded 1048576 limit", and the snapshot failed.)
func TestBigTrees(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := bigTree(40000), bigTree(40001)
	ab, ah, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	bb, bh, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(ab) < bigValue || len(bb) < bigValue {
		t.Fatalf("trees of %d and %d bytes: not past the value threshold", len(ab), len(bb))
	}
	if err := db.PutTrees(map[TreeHash][]byte{ah: ab}); err != nil {
		t.Fatalf("PutTrees of a %d-byte tree: %v", len(ab), err)
	}
	refs := NewRefs()
	refs.Add(1)
	if _, err := db.CreateSnapshot(&Snapshot{Name: "big", Root: dirEntry(bh)}, refs, map[TreeHash][]byte{bh: bb}); err != nil {
		t.Fatalf("CreateSnapshot with a %d-byte tree: %v", len(bb), err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for h, want := range map[TreeHash]int{ah: 40000, bh: 40001} {
		got, err := db.Tree(h)
		if err != nil || len(got.Entries) != want || got.Entries[want-1].Name != fmt.Sprintf("file-with-a-longish-name-%06d", want-1) {
			t.Errorf("tree %s after reopen: %v", h, err)
		}
	}
}
