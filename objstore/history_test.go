package objstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// histSnap records a snapshot of the given files at time t.
func histSnap(t *testing.T, s *Store, name string, at time.Time, revs map[string]index.RevID) index.Snapshot {
	t.Helper()
	root, trees := snapTree(t, revs)
	res, err := s.CreateSnapshot(context.Background(), SnapshotRequest{Name: name, Time: at, Root: root, Trees: trees})
	if err != nil {
		t.Fatal(err)
	}
	return res.Snapshot
}

func snapNames(l []index.Snapshot) string {
	var out []string
	for _, sn := range l {
		out = append(out, sn.Name)
	}
	return fmt.Sprint(out)
}

func TestHistoryListsOneFilesRevisions(t *testing.T) {
	s, _ := openNew(t, Config{})
	ctx := context.Background()
	f := mustNewFile(t, s, "f")
	g := mustNewFile(t, s, "g")
	var prev index.RevID
	texts := []string{"first version\n", "first version, longer\n", "third"}
	for i, txt := range texts {
		prev = mustPut(t, s, PutRequest{File: f, Data: []byte(txt), P1: prev}).ID()
		mustPut(t, s, PutRequest{File: g, Data: []byte(fmt.Sprint("other ", i))})
	}
	hist, err := s.History(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != len(texts) {
		t.Fatalf("%d revisions, want %d", len(hist), len(texts))
	}
	for i, h := range hist {
		e, err := s.Entry(h.ID(f))
		if err != nil {
			t.Fatal(err)
		}
		if h.Rev != index.Rev(i) || h.Size != uint64(len(texts[i])) || h.Kind != e.Kind || h.ChainLen != e.ChainLen ||
			h.Time.UnixNano() != e.Time || h.P1 != e.P1 || h.Base != e.Base {
			t.Errorf("revision %d: %+v, entry %+v", i, h, e)
		}
		if i > 0 && h.P1 != hist[i-1].ID(f) {
			t.Errorf("revision %d: parent %v", i, h.P1)
		}
	}
	if hist[0].Kind != index.KindFull || hist[1].Kind == index.KindFull {
		t.Errorf("kinds %v %v: want a fulltext then a delta", hist[0].Kind, hist[1].Kind)
	}
	if r, err := s.Revision(index.RevID{File: f, Rev: 1}); err != nil || r != hist[1] {
		t.Errorf("Revision(1) = %+v, %v", r, err)
	}
	if _, err := s.Revision(index.RevID{File: f, Rev: 3}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Revision(3): %v, want not found", err)
	}
	if _, err := s.History(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("History of an unknown file: %v", err)
	}
	empty := mustNewFile(t, s, "empty")
	if h, err := s.History(ctx, empty); err != nil || len(h) != 0 {
		t.Errorf("History of a file never written: %v, %v", h, err)
	}
}

func TestHoldingFindsTheSnapshotsOfEachRevision(t *testing.T) {
	s, _ := openNew(t, Config{})
	ctx := context.Background()
	f := mustNewFile(t, s, "f")
	g := mustNewFile(t, s, "g")
	g0 := mustPut(t, s, PutRequest{File: g, Data: []byte("g")}).ID()
	r0 := mustPut(t, s, PutRequest{File: f, Data: []byte("zero")}).ID()
	histSnap(t, s, "a", time.Now(), map[string]index.RevID{"f": r0, "g": g0})
	histSnap(t, s, "b", time.Now(), map[string]index.RevID{"f": r0})
	r1 := mustPut(t, s, PutRequest{File: f, Data: []byte("one"), P1: r0}).ID()
	r2 := mustPut(t, s, PutRequest{File: f, Data: []byte("two"), P1: r1}).ID()
	histSnap(t, s, "c", time.Now(), map[string]index.RevID{"f": r2})
	histSnap(t, s, "without", time.Now(), map[string]index.RevID{"g": g0})
	// Taken after r2 but holding r0 (restored from an old tree): the
	// newest-by-time probe misses and the intersection finds it.
	histSnap(t, s, "old", time.Now(), map[string]index.RevID{"f": r0, "g": g0})
	// Timed before any revision: the probe has no candidate.
	histSnap(t, s, "early", time.Unix(1, 0), map[string]index.RevID{"f": r1})
	if err := s.DeleteSnapshot("b"); err != nil {
		t.Fatal(err)
	}

	hist, err := s.History(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Holding(ctx, f, hist)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[a old]", "[early]", "[c]"}
	for i, w := range want {
		if got := snapNames(held[i]); got != w {
			t.Errorf("revision %d held by %s, want %s", i, got, w)
		}
	}
	for i, w := range want {
		got, err := s.SnapshotsHolding(ctx, hist[i].ID(f))
		if err != nil || snapNames(got) != w {
			t.Errorf("SnapshotsHolding(%d) = %s, %v; want %s", i, snapNames(got), err, w)
		}
	}
	for name, w := range map[string]index.RevID{"a": r0, "c": r2, "old": r0, "early": r1} {
		if got, err := s.SnapshotRevision(ctx, f, name); err != nil || got != w {
			t.Errorf("SnapshotRevision(%s) = %v, %v; want %v", name, got, err, w)
		}
	}
	for _, name := range []string{"without", "b", "nosuch"} {
		if _, err := s.SnapshotRevision(ctx, f, name); !errors.Is(err, ErrNotFound) {
			t.Errorf("SnapshotRevision(%s): %v, want not found", name, err)
		}
	}
}
