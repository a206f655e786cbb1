package objstore

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// snapTree encodes a one-directory tree of the given files.
func snapTree(t *testing.T, revs map[string]index.RevID) (index.TreeEntry, map[index.TreeHash][]byte) {
	t.Helper()
	tr := &index.Tree{}
	for name, r := range revs {
		tr.Entries = append(tr.Entries, index.TreeEntry{Name: name, Mode: syscall.S_IFREG | 0o644, Nlink: 1, Rev: r})
	}
	tr.Sort()
	b, h, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	root := index.TreeEntry{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Tree: h}
	return root, map[index.TreeHash][]byte{h: b}
}

func TestSnapshotRefsFollowTheTree(t *testing.T) {
	s, dir := openNew(t, Config{})
	ctx := context.Background()
	f := mustNewFile(t, s, "a")
	g := mustNewFile(t, s, "b")
	a0 := mustPut(t, s, PutRequest{File: f, Data: []byte("one")}).ID()
	b0 := mustPut(t, s, PutRequest{File: g, Data: []byte("two")}).ID()
	root, trees := snapTree(t, map[string]index.RevID{"a": a0, "b": b0})
	r1, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "s1", Time: time.Unix(1, 0), Root: root, Trees: trees})
	if err != nil || r1.Refs != 2 {
		t.Fatalf("s1: %+v, %v", r1, err)
	}
	a1 := mustPut(t, s, PutRequest{File: f, Data: []byte("one!"), P1: a0}).ID()
	root2, trees2 := snapTree(t, map[string]index.RevID{"a": a1})
	r2, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "s2", Root: root2, Trees: trees2})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := s.SnapshotRefs(r2.Snapshot.ID)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := index.RefKey(a1)
	if refs.GetCardinality() != 1 || !refs.Contains(k) {
		t.Fatalf("s2 refs %v, want only %v", refs.ToArray(), a1)
	}
	if _, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "s2", Root: root2}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "..", Root: root2}); !errors.Is(err, ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	if err := s.RenameSnapshot("s1", "first"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshot("s2"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Reopened read-only: listing and trees work, changes are refused.
	ro, err := Open(dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	list, err := ro.SnapshotList(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "first" || list[0].Time != time.Unix(1, 0).UnixNano() {
		t.Fatalf("list %+v, %v", list, err)
	}
	tr, err := ro.Tree(list[0].Root.Tree)
	if e, ok := tr.Lookup("b"); err != nil || !ok || e.Rev != b0 {
		t.Fatalf("tree lookup b: %+v %v %v", e, ok, err)
	}
	if err := ro.DeleteSnapshot("first"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("delete on a read-only store: %v", err)
	}
}

// BenchmarkSnapshotList lists 10,000 snapshots (M4's second figure, at
// the store level).
func BenchmarkSnapshotList(b *testing.B) {
	s, _ := openNew(b, Config{})
	ctx := context.Background()
	tr := &index.Tree{}
	bt, h, _ := tr.Encode()
	root := index.TreeEntry{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Tree: h}
	for i := range 10000 {
		req := SnapshotRequest{Name: fmt.Sprintf("auto-%05d", i), Root: root, Trees: map[index.TreeHash][]byte{h: bt}}
		if _, err := s.CreateSnapshot(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		list, err := s.SnapshotList(ctx)
		if err != nil || len(list) != 10000 {
			b.Fatal(len(list), err)
		}
	}
}

// TestSnapshotDecodedTrees: trees handed decoded (the new one and the
// previous snapshot's) give the reference set the encoded ones give, and
// the reference diff takes them from there, decoding none itself; without
// them it decodes every tree it loads.
func TestSnapshotDecodedTrees(t *testing.T) {
	s, _ := openNew(t, Config{})
	defer s.Close()
	ctx := context.Background()
	f := mustNewFile(t, s, "a")
	a0 := mustPut(t, s, PutRequest{File: f, Data: []byte("one")}).ID()
	a1 := mustPut(t, s, PutRequest{File: f, Data: []byte("one!"), P1: a0}).ID()
	decoded := map[index.TreeHash]*index.Tree{}
	for i, rev := range []index.RevID{a0, a1} {
		root, trees := snapTree(t, map[string]index.RevID{"a": rev, fmt.Sprint("b", i): a0})
		for h, b := range trees {
			var tr index.Tree
			if err := tr.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			decoded[h] = &tr
		}
		r, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: fmt.Sprint("s", i), Root: root, Trees: trees, Decoded: decoded})
		if err != nil {
			t.Fatal(err)
		}
		refs, err := s.SnapshotRefs(r.Snapshot.ID)
		if err != nil {
			t.Fatal(err)
		}
		k0, _ := index.RefKey(a0)
		k1, _ := index.RefKey(rev)
		if !refs.Contains(k0) || !refs.Contains(k1) || refs.GetCardinality() != uint64(1+i) {
			t.Fatalf("s%d refs %v, want %v and %v", i, refs.ToArray(), a0, rev)
		}
		if r.TreesRead != 1+i || r.TreesDecoded != 0 {
			t.Fatalf("s%d: the diff loaded %d trees and decoded %d of them itself; want %d, all taken from Decoded", i, r.TreesRead, r.TreesDecoded, 1+i)
		}
	}
	root, trees := snapTree(t, map[string]index.RevID{"a": a1})
	r, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "s2", Root: root, Trees: trees})
	if err != nil {
		t.Fatal(err)
	}
	if r.TreesRead != 2 || r.TreesDecoded != 2 || r.Refs != 1 {
		t.Fatalf("s2 without Decoded: %d trees loaded, %d decoded, %d refs; want 2, 2, 1", r.TreesRead, r.TreesDecoded, r.Refs)
	}
}
