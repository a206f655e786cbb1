package objstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestRepackAfterPruningGC: gc --prune-unsnapshotted leaves a file's
// history starting past revision 0; a repack after it, both reuse modes,
// must take the gap in its stride and keep the newest text readable.
func TestRepackAfterPruningGC(t *testing.T) {
	ctx := context.Background()
	for _, reuse := range []Reuse{ReuseAuto, ReuseNever} {
		s, dir := openNew(t, Config{})
		f, err := s.NewFile("a")
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.NewFile("b")
		if err != nil {
			t.Fatal(err)
		}
		prev, last := index.NullRev, []byte(nil)
		for i := range 10 {
			last = []byte(fmt.Sprintf("text %d of file a, and a few more bytes of it\n", i))
			e, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(last), P1: prev})
			if err != nil {
				t.Fatal(err)
			}
			prev = e.ID()
		}
		if _, err := s.Put(ctx, PutRequest{File: g, Data: []byte("bee")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		live := func() (map[index.FileID]bool, error) { return map[index.FileID]bool{f: true, g: true}, nil }
		rep, err := GC(ctx, dir, GCOptions{Live: live, Policy: GCPolicy{PruneUnsnapshotted: true}})
		if err != nil || rep.Removed != 9 {
			t.Fatalf("gc: removed %d, %v; want 9", rep.Removed, err)
		}
		if _, err := Repack(ctx, dir, RepackOptions{Reuse: reuse}); err != nil {
			t.Fatalf("repack %v after gc: %v", reuse, err)
		}
		s, err = Open(dir, Config{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, prev); err != nil || !bytes.Equal(got, last) {
			t.Errorf("reuse %v: newest revision %q, %v", reuse, got, err)
		}
		if _, err := s.Verify(ctx, func(p Problem) { t.Errorf("reuse %v: verify: %v", reuse, p) }); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

// TestRepackAfterGCRemovedFile: once gc has removed a deleted file's
// revisions all, its record still counts them; a repack, both reuse
// modes, must pass over it (it looked revision Revs-1 up for its
// similar-file table, and failed for good), and a later gc too.
func TestRepackAfterGCRemovedFile(t *testing.T) {
	ctx := context.Background()
	for _, reuse := range []Reuse{ReuseAuto, ReuseNever} {
		s, dir := openNew(t, Config{})
		a, b := mustNewFile(t, s, "a"), mustNewFile(t, s, "b")
		ea := mustPut(t, s, PutRequest{File: a, Data: []byte("a\n")})
		mustPut(t, s, PutRequest{File: b, Data: []byte("b\n")})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		live := func() (map[index.FileID]bool, error) { return map[index.FileID]bool{a: true}, nil }
		rep, err := GC(ctx, dir, GCOptions{Live: live})
		if err != nil || rep.Removed != 1 || rep.RemovedFiles != 1 {
			t.Fatalf("gc: removed %d (%d files), %v; want 1 (1)", rep.Removed, rep.RemovedFiles, err)
		}
		// Something changed since, so that a repack has work to do.
		s, err = Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		next := mustPut(t, s, PutRequest{File: a, Data: []byte("a, again\n"), P1: ea.ID()})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := Repack(ctx, dir, RepackOptions{Reuse: reuse}); err != nil {
			t.Fatalf("repack %v after gc: %v", reuse, err)
		}
		if _, err := GC(ctx, dir, GCOptions{Live: live}); err != nil {
			t.Fatalf("second gc: %v", err)
		}
		s, err = Open(dir, Config{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, next.ID()); string(got) != "a, again\n" {
			t.Errorf("reuse %v: newest revision %q", reuse, got)
		}
		verifyClean(t, s)
		s.Close()
	}
}

// TestGCKeepsNewestStoredRevision: a live file whose newest revisions an
// earlier gc removed (it was deleted then; a snapshot held an older one)
// keeps its newest stored revision under a pruning gc, not only a
// revision numbered Revs-1, which is gone; SnapshotUsages does not count
// that revision as a snapshot's own either.
func TestGCKeepsNewestStoredRevision(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f := mustNewFile(t, s, "f")
	var ids []index.RevID
	prev := index.NullRev
	for i := range 3 {
		e := mustPut(t, s, PutRequest{File: f, Data: []byte(fmt.Sprintf("text %d\n", i)), P1: prev})
		prev = e.ID()
		ids = append(ids, prev)
	}
	root, trees := snapTree(t, map[string]index.RevID{"f": ids[1]})
	if _, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "s", Root: root, Trees: trees}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	none := func() (map[index.FileID]bool, error) { return map[index.FileID]bool{}, nil }
	if rep, err := GC(ctx, dir, GCOptions{Live: none}); err != nil || rep.Removed != 2 {
		t.Fatalf("gc of the deleted file: removed %d, %v; want 2", rep.Removed, err)
	}
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	live := map[index.FileID]bool{f: true}
	us, err := s.SnapshotUsages(ctx, live)
	if err != nil || len(us) != 1 || us[0].ExclusiveRevs != 0 {
		t.Fatalf("usages %+v, %v: the live file's newest revision is not the snapshot's alone", us, err)
	}
	if err := s.DeleteSnapshot("s"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	liveFn := func() (map[index.FileID]bool, error) { return live, nil }
	if _, err := GC(ctx, dir, GCOptions{Live: liveFn, Policy: GCPolicy{PruneUnsnapshotted: true}}); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := mustGet(t, s, ids[1]); string(got) != "text 1\n" {
		t.Fatalf("newest stored revision %q", got)
	}
	if e, ok, err := s.Latest(f); err != nil || !ok || e.ID() != ids[1] {
		t.Fatalf("Latest = %v %v %v, want %v", e.ID(), ok, err, ids[1])
	}
	verifyClean(t, s)
}
