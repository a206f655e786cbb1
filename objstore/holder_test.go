package objstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// holderAnswers compares, for every file, EachHolder (the file's hold
// rows) with HoldingRevs (every snapshot's reference set probed).
func holderAnswers(t *testing.T, s *Store, files []index.FileID, step string) {
	t.Helper()
	ctx := context.Background()
	list, err := s.SnapshotList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got := map[index.Rev][]string{}
		err := s.EachHolder(ctx, f, list, func(i int, rev index.Rev) { got[rev] = append(got[rev], list[i].Name) })
		if err != nil {
			t.Fatal(err)
		}
		held, err := s.HoldingRevs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		want := map[index.Rev][]string{}
		for rev, l := range held {
			for _, sn := range l {
				want[rev] = append(want[rev], sn.Name)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: file %d: hold rows say %v, reference sets %v", step, f, got, want)
		}
	}
}

// TestEachHolderMatchesHoldingRevs runs a random history (puts,
// snapshots of random trees, deletions, renames, and a repack and a gc
// between two halves) and compares the snapshot column of every file
// from its hold rows with the reference sets' answer after each step;
// verify, which checks the rows too, finds nothing at the end.
func TestEachHolderMatchesHoldingRevs(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	s, dir := openNew(t, Config{})
	ctx := context.Background()
	files := make([]index.FileID, 6)
	revs := make([][]index.RevID, len(files))
	for i := range files {
		files[i] = mustNewFile(t, s, fmt.Sprint("f", i))
	}
	n := 0
	run := func(steps int) {
		for step := range steps {
			list, err := s.SnapshotList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch op := rng.IntN(12); {
			case op < 4:
				i := rng.IntN(len(files))
				var p1 index.RevID
				if len(revs[i]) > 0 {
					p1 = revs[i][len(revs[i])-1]
				}
				e := mustPut(t, s, PutRequest{File: files[i], Data: []byte(fmt.Sprint("file ", i, " text ", step, " ", n)), P1: p1})
				revs[i] = append(revs[i], e.ID())
			case op < 9 || len(list) == 0:
				tree := map[string]index.RevID{}
				for i := range files {
					if len(revs[i]) == 0 || rng.IntN(4) == 0 {
						continue // not in this tree
					}
					tree[fmt.Sprint("f", i)] = revs[i][len(revs[i])-1]
					if rng.IntN(5) == 0 { // an old revision under a second name
						tree[fmt.Sprint("old", i)] = revs[i][rng.IntN(len(revs[i]))]
					}
				}
				if len(tree) == 0 {
					continue
				}
				n++
				histSnap(t, s, fmt.Sprint("s", n), time.Now(), tree)
			case op < 11:
				if err := s.DeleteSnapshot(list[rng.IntN(len(list))].Name); err != nil {
					t.Fatal(err)
				}
			default:
				n++
				if err := s.RenameSnapshot(list[rng.IntN(len(list))].Name, fmt.Sprint("r", n)); err != nil {
					t.Fatal(err)
				}
			}
			holderAnswers(t, s, files, fmt.Sprint("step ", step))
		}
	}
	run(120)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	live := func() (map[index.FileID]bool, error) { return map[index.FileID]bool{files[0]: true}, nil }
	if _, err := Repack(ctx, dir, RepackOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := GC(ctx, dir, GCOptions{Live: live, Policy: GCPolicy{PruneUnsnapshotted: true}}); err != nil {
		t.Fatal(err)
	}
	var err error
	if s, err = Open(dir, Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	holderAnswers(t, s, files, "after gc and repack")
	for i := range revs { // gc removed unsnapshotted revisions: put on the newest kept
		h, err := s.History(ctx, files[i])
		if err != nil {
			t.Fatal(err)
		}
		revs[i] = revs[i][:0]
		for _, r := range h {
			revs[i] = append(revs[i], r.ID(files[i]))
		}
	}
	run(80)
	if _, err := s.Verify(ctx, func(p Problem) { t.Errorf("verify: %v", p) }); err != nil {
		t.Fatal(err)
	}
}
