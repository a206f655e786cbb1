package objstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// The test binary re-executes itself to run a gc that the test kills:
// GC_HELPER_DIR names the store; files 1 and 3 are live (see gcStore).
const gcHelperEnv = "GC_HELPER_DIR"

func gcKillOptions() GCOptions {
	return GCOptions{
		Live:   func() (map[index.FileID]bool, error) { return map[index.FileID]bool{1: true, 3: true}, nil },
		Repack: RepackOptions{Reuse: ReuseNever, Jobs: 1, commitEvery: 5, SegmentSize: 64 << 10},
	}
}

func TestGCHelperProcess(t *testing.T) {
	dir := os.Getenv(gcHelperEnv)
	if dir == "" {
		t.Skip("only runs as a helper subprocess")
	}
	opt := gcKillOptions()
	opt.Repack.Progress = printCommitted()
	fmt.Println("start")
	rep, err := GC(context.Background(), dir, opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	resumed := rep.Repack != nil && rep.Repack.Resumed
	fmt.Printf("done %d removed, resumed %v\n", rep.Removed, resumed)
	os.Exit(0)
}

// TestGCKillLoop SIGKILLs gcs at random moments. After each kill the
// store opens, reads every revision gc keeps byte for byte and verifies
// clean; once a gc has finished, the removed revisions are gone, and the
// loop starts again on a fresh copy of the store.
func TestGCKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("kill loop skipped in -short")
	}
	g := newGCStoreSized(t, 60, 16_000)
	keep := g.expect(t, GCPolicy{})
	template := t.TempDir()
	if err := os.CopyFS(template, os.DirFS(g.dir)); err != nil {
		t.Fatal(err)
	}
	fresh := func() {
		if err := os.RemoveAll(g.dir); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(g.dir, os.DirFS(template)); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(6, 2027))
	const kills, maxRounds = 12, 60
	round, killed, switched, finished := 0, 0, 0, 0
	for ; killed < kills && round < maxRounds; round++ {
		cmd, sc := startHelperEnv(t, "^TestGCHelperProcess$", gcHelperEnv, g.dir)
		wasKilled := killAfter(t, cmd, sc, killWait(r, round))
		if wasKilled {
			killed++
		}
		if exists(filepath.Join(g.dir, shadowName, switchName)) {
			switched++
		}
		g.checkKept(t, keep)
		if !wasKilled || !exists(filepath.Join(g.dir, shadowName)) && gcDone(t, g.dir) {
			finished++
			g.checkAfter(t, keep)
			fresh()
		}
		if t.Failed() {
			t.Fatalf("round %d", round)
		}
	}
	if killed < kills {
		t.Errorf("%d gcs killed in %d rounds", killed, round)
	}
	// Kill one mid-way, then let the next finish what it did.
	for try := 0; !killMidwayEnv(t, "^TestGCHelperProcess$", gcHelperEnv, g.dir); try++ {
		if try == 3 {
			t.Fatal("no gc could be killed mid-way")
		}
		fresh()
	}
	rep, err := GC(context.Background(), g.dir, gcKillOptions())
	if err != nil || rep.Repack == nil || !rep.Repack.Resumed {
		t.Fatalf("gc after a kill mid-way did not resume: %+v, %v", rep, err)
	}
	g.checkAfter(t, keep)
	t.Logf("%d rounds, %d killed, %d in the switch, %d finished", round, killed, switched, finished)
}

// gcDone reports whether the store in dir has nothing left to collect.
func gcDone(t *testing.T, dir string) bool {
	opt := gcKillOptions()
	opt.DryRun = true
	rep, err := GC(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Removed == 0
}

// checkKept opens dir and reads every revision gc keeps; verify is clean.
func (g *gcStore) checkKept(t *testing.T, keep map[index.RevID]bool) {
	t.Helper()
	s, err := Open(g.dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id := range keep {
		if got := mustGet(t, s, id); string(got) != string(g.h.texts[id]) {
			t.Fatalf("kept %v reads back wrong", id)
		}
	}
	verifyClean(t, s)
}
