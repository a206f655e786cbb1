package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// gcStore is a history of four files (see history: merges, dedups, file 2
// starting from file 1's text) in which files 1 and 3 are live and 2 and 4
// deleted; snapshot "keep" holds 2@17 and 4@26, snapshot "gone" held 2@5
// and was deleted.
type gcStore struct {
	h    *history
	dir  string
	live map[index.FileID]bool
	refs []index.RevID
}

func newGCStore(t *testing.T) *gcStore { return newGCStoreSized(t, 30, 8_000) }

func newGCStoreSized(t *testing.T, revs, size int) *gcStore {
	t.Helper()
	h := newHistory(4, revs, size)
	s, dir := openNew(t, Config{SegmentSize: 64 << 10})
	h.write(t, s)
	g := &gcStore{h: h, dir: dir, live: map[index.FileID]bool{1: true, 3: true},
		refs: []index.RevID{{File: 2, Rev: index.Rev(revs / 2)}, {File: 4, Rev: index.Rev(revs - 4)}}}
	ctx := context.Background()
	root, trees := snapTree(t, map[string]index.RevID{"b": g.refs[0], "d": g.refs[1]})
	if _, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "keep", Time: time.Unix(10, 0), Root: root, Trees: trees}); err != nil {
		t.Fatal(err)
	}
	root, trees = snapTree(t, map[string]index.RevID{"b": {File: 2, Rev: 5}})
	if _, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "gone", Time: time.Unix(20, 0), Root: root, Trees: trees}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSnapshot("gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *gcStore) liveFn() (map[index.FileID]bool, error) { return g.live, nil }

// expect lists what gc with pol must keep, from the policy's own words:
// snapshot references, live files' newest revisions, their history unless
// pruned, and the target of every kept dedup.
func (g *gcStore) expect(t testing.TB, pol GCPolicy) map[index.RevID]bool {
	t.Helper()
	s, err := Open(g.dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keep := map[index.RevID]bool{}
	for _, r := range g.refs {
		keep[r] = true
	}
	for id := range g.h.texts {
		if g.live[id.File] && (!pol.prunes() || int(id.Rev) == g.h.revs-1) {
			keep[id] = true
		}
	}
	for id := range keep {
		e, err := s.Entry(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == index.KindDedup {
			keep[e.Base] = true
		}
	}
	return keep
}

// checkAfter checks that dir reads every kept revision byte for byte, has
// no entry for the others, and verifies clean.
func (g *gcStore) checkAfter(t testing.TB, keep map[index.RevID]bool) {
	t.Helper()
	s, err := Open(g.dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, want := range g.h.texts {
		got, err := s.Get(context.Background(), id)
		switch {
		case keep[id] && err != nil:
			t.Fatalf("kept %v: %v", id, err)
		case keep[id] && !bytes.Equal(got, want):
			t.Fatalf("kept %v reads back wrong", id)
		case !keep[id] && !errors.Is(err, ErrNotFound):
			t.Fatalf("removed %v: read gives %v", id, err)
		}
	}
	verifyClean(t, s)
}

func TestGCDefaultPolicyRemovesDeletedFilesHistory(t *testing.T) {
	g := newGCStore(t)
	keep := g.expect(t, GCPolicy{})
	ctx := context.Background()
	dry, err := GC(ctx, g.dir, GCOptions{Live: g.liveFn, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(len(g.h.texts) - len(keep))
	if dry.Removed != want || dry.Kept != int64(len(keep)) || dry.Reclaimed != 0 || dry.Repack != nil || dry.Snapshots != 1 {
		t.Fatalf("dry run: %+v, want %d removed", dry, want)
	}
	rep, err := GC(ctx, g.dir, GCOptions{Live: g.liveFn, Repack: RepackOptions{Jobs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	if rep.Removed != want || rep.RemovedFiles != 0 || rep.Reclaimed == 0 || rep.SizeAfter+rep.Reclaimed != rep.SizeBefore {
		t.Errorf("report %+v, want %d removed and bytes reclaimed", rep, want)
	}
	// The removed revisions' records were about half the store: deleted
	// files 2 and 4 held as much as live files 1 and 3.
	if rep.RemovedStored == 0 || rep.Reclaimed < rep.RemovedStored/2 {
		t.Errorf("reclaimed %d of the removed revisions' %d record bytes", rep.Reclaimed, rep.RemovedStored)
	}
	g.checkAfter(t, keep)

	// Nothing left to remove: a second gc rewrites nothing.
	again, err := GC(ctx, g.dir, GCOptions{Live: g.liveFn})
	if err != nil || again.Removed != 0 || again.Repack != nil {
		t.Fatalf("second gc: %+v, %v", again, err)
	}

	// The store takes new revisions: the next one of a live file, and a
	// new file whose content only a removed revision had (no dedup
	// against a revision that is gone).
	s, err := Open(g.dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	last := index.RevID{File: 1, Rev: index.Rev(g.h.revs - 1)}
	next := append(bytes.Clone(g.h.texts[last]), "more\n"...)
	e := mustPut(t, s, PutRequest{File: 1, Data: next, P1: last})
	var gone index.RevID
	for id := range g.h.texts {
		if !keep[id] {
			gone = id
			break
		}
	}
	f := mustNewFile(t, s, "again")
	e2 := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(g.h.texts[gone])})
	if !bytes.Equal(mustGet(t, s, e.ID()), next) || !bytes.Equal(mustGet(t, s, e2.ID()), g.h.texts[gone]) {
		t.Fatal("revisions put after gc read back wrong")
	}
	verifyClean(t, s)
}

func TestGCPolicies(t *testing.T) {
	later := time.Now().Add(2 * time.Hour)
	for _, tc := range []struct {
		name string
		pol  GCPolicy
		all  bool // nothing unsnapshotted is old enough to go
	}{
		{"prune-unsnapshotted", GCPolicy{PruneUnsnapshotted: true}, false},
		{"keep-within-1h-2h-later", GCPolicy{KeepWithin: time.Hour, Now: later}, false},
		{"keep-within-3h-2h-later", GCPolicy{KeepWithin: 3 * time.Hour, Now: later}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGCStore(t)
			keep := g.expect(t, tc.pol)
			if tc.all {
				keep = map[index.RevID]bool{}
				for id := range g.h.texts {
					keep[id] = true
				}
			}
			rep, err := GC(context.Background(), g.dir, GCOptions{Policy: tc.pol, Live: g.liveFn})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Kept != int64(len(keep)) || rep.Removed != int64(len(g.h.texts)-len(keep)) {
				t.Errorf("report %+v, want %d kept", rep, len(keep))
			}
			if rep.Removed > 0 && rep.SizeAfter >= rep.SizeBefore {
				t.Errorf("gc removed %d revisions and the store grew: %d -> %d bytes", rep.Removed, rep.SizeBefore, rep.SizeAfter)
			}
			g.checkAfter(t, keep)
		})
	}
}

func TestGCRefusesALockedStore(t *testing.T) {
	g := newGCStore(t)
	cmd, stdin, _, first := startHelper(t, "hold-lock", g.dir)
	defer cmd.Wait()
	defer stdin.Close()
	if first != "locked" {
		t.Fatalf("helper: %q", first)
	}
	_, err := GC(context.Background(), g.dir, GCOptions{Live: g.liveFn})
	var le *LockError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("gc of a locked store: %v", err)
	}
	if want := "/mnt/helper"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Errorf("error %q does not name the holder %s", err, want)
	}
}

// TestGCOpenFinishesSwitch ends a gc's switch after each of its steps, as
// a crash would: the next Open completes it, removing exactly what the
// plan removed.
func TestGCOpenFinishesSwitch(t *testing.T) {
	for _, step := range []string{"marked", "copied", "swapped", "old-removed", "renamed"} {
		t.Run(step, func(t *testing.T) {
			g := newGCStore(t)
			keep := g.expect(t, GCPolicy{})
			crash := errors.New("crash")
			opt := GCOptions{Live: g.liveFn, Repack: RepackOptions{stopAt: func(s string) error {
				if s == step {
					return crash
				}
				return nil
			}}}
			if _, err := GC(context.Background(), g.dir, opt); !errors.Is(err, crash) {
				t.Fatalf("gc: %v", err)
			}
			g.checkAfter(t, keep)
			for _, name := range []string{shadowName, doneName, oldSegsName} {
				if exists(filepath.Join(g.dir, name)) {
					t.Errorf("%s left behind", name)
				}
			}
		})
	}
}

// TestGCEveryOtherRevision: a live file of small edits whose every other
// revision a snapshot holds. Pruning the others must not make the kept
// ones grow by as much as the records removed: each one left without its
// parent is stored against the nearest kept ancestor, not a snapshot or
// fulltext.
func TestGCEveryOtherRevision(t *testing.T) {
	s, dir := openNew(t, Config{})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	f := mustNewFile(t, s, "f")
	text := genText(r, 16_000)
	var prev index.RevID
	revs := map[string]index.RevID{}
	texts := map[index.RevID][]byte{}
	for i := range 60 {
		text = edit(r, text, 2)
		prev = mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text), P1: prev}).ID()
		texts[prev] = text
		if i%2 == 1 {
			revs = map[string]index.RevID{"f": prev}
			root, trees := snapTree(t, revs)
			if _, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: fmt.Sprint("s", i), Root: root, Trees: trees}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	live := func() (map[index.FileID]bool, error) { return map[index.FileID]bool{f: true}, nil }
	rep, err := GC(ctx, dir, GCOptions{Policy: GCPolicy{PruneUnsnapshotted: true}, Live: live})
	if err != nil {
		t.Fatal(err)
	}
	// Each kept delta now carries its removed parent's edits as well, so
	// only part of the removed bytes comes back; without the stand-in
	// parent the store grew (11,080 -> 12,092 bytes, against 8,855).
	if rep.Removed != 30 || rep.SizeAfter+rep.RemovedStored/4 > rep.SizeBefore {
		t.Errorf("removed %d revisions of %d record bytes: %d -> %d bytes", rep.Removed, rep.RemovedStored, rep.SizeBefore, rep.SizeAfter)
	}
	s, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, want := range texts {
		got, err := s.Get(ctx, id)
		if id.Rev%2 == 1 && (err != nil || !bytes.Equal(got, want)) {
			t.Fatalf("kept %v: %v", id, err)
		}
		if id.Rev%2 == 0 && !errors.Is(err, ErrNotFound) {
			t.Fatalf("removed %v: %v", id, err)
		}
	}
	verifyClean(t, s)
}

// TestGCKeepsSegments: on a repacked store, gc rewrites only the segments
// holding removed records (or records based on them); every other segment
// file is kept as it is (repack_keep.go).
func TestGCKeepsSegments(t *testing.T) {
	g := newGCStore(t)
	// One job: files in order, so files 1 and 3 (live) and 2 and 4
	// (deleted: their history goes) fill segments of their own, mostly.
	mustRepack(t, g.dir, RepackOptions{Reuse: ReuseNever, Jobs: 1, SegmentSize: 2 << 10})
	keep := g.expect(t, GCPolicy{})
	before := segFiles(t, g.dir)
	rep, err := GC(context.Background(), g.dir, GCOptions{Live: g.liveFn, Repack: RepackOptions{SegmentSize: 2 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	g.checkAfter(t, keep)
	after := segFiles(t, g.dir)
	kept := 0
	for name, fi := range before {
		if after[name] == fi {
			kept++
		}
	}
	t.Logf("%d of %d segments kept; %+v", kept, len(before), rep)
	if kept == 0 || kept < len(before)/4 || kept == len(before) || rep.Reclaimed == 0 {
		t.Errorf("%d of %d segments kept, %d bytes reclaimed", kept, len(before), rep.Reclaimed)
	}
}
