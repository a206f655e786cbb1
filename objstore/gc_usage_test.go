package objstore

import (
	"context"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

func TestSnapshotUsages(t *testing.T) {
	g := newGCStore(t) // "keep" holds 2@15 and 4@26 (a dedup: no bytes of its own)
	ctx := context.Background()
	s, err := Open(g.dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a3, b15, aNewest := index.RevID{File: 1, Rev: 3}, index.RevID{File: 2, Rev: 15}, index.RevID{File: 1, Rev: 29}
	root, trees := snapTree(t, map[string]index.RevID{"a": a3, "b": b15, "c": aNewest})
	if _, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "extra", Time: time.Unix(30, 0), Root: root, Trees: trees}); err != nil {
		t.Fatal(err)
	}
	stored := func(id index.RevID) uint64 {
		e, err := s.Entry(id)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(e.Stored)
	}
	us, err := s.SnapshotUsages(ctx, g.live)
	if err != nil {
		t.Fatal(err)
	}
	// keep: 2@15 is shared with extra, 4@26 is its own. extra: 1@3 is
	// its own, 1@29 is the live file's newest, 2@15 shared.
	want := []SnapshotUsage{{ID: 1, Name: "keep", ExclusiveRevs: 1}, {ID: 3, Name: "extra", ExclusiveRevs: 1, ExclusiveBytes: stored(a3)}}
	if len(us) != 2 || us[0] != want[0] || us[1] != want[1] || want[1].ExclusiveBytes == 0 {
		t.Fatalf("usages %+v, want %+v", us, want)
	}
	// What it says deleting extra frees is what a pruning gc frees more.
	removable := func() uint64 {
		t.Helper()
		p, err := planGC(ctx, s, g.live, GCPolicy{PruneUnsnapshotted: true})
		if err != nil {
			t.Fatal(err)
		}
		return p.removedStored
	}
	before := removable()
	if err := s.DeleteSnapshot("extra"); err != nil {
		t.Fatal(err)
	}
	if got := removable() - before; got != us[1].ExclusiveBytes {
		t.Errorf("deleting extra lets gc remove %d more bytes; its usage said %d", got, us[1].ExclusiveBytes)
	}
	us, err = s.SnapshotUsages(ctx, g.live)
	if err != nil || len(us) != 1 || us[0].ExclusiveRevs != 2 || us[0].ExclusiveBytes != stored(b15) {
		t.Fatalf("after deleting extra: %+v, %v; want 2@15 and 4@26 exclusive to keep", us, err)
	}
}
