package objstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/internal/testutil/crashfs"
)

// envPowerCutRepackRounds sets TestPowerCutRepack's number of rounds
// (default: every cut of pcutPlans once in each kind of run; -short and
// under the race detector: each once, the kinds taking turns).
const envPowerCutRepackRounds = "DELTAFS_POWERCUT_REPACK_ROUNDS"

// A pcutPlan says when a round cuts the power: once the helper has said
// a line starting with after (its first line: at once; "committed": a
// share of the revisions in the shadow; "step NAME": a step of the
// switch; "done": Repack or GC returned), plus up to jitter ms. A plan
// with pause stops the helper in the step until the cut, so that the
// cut lands exactly between two steps.
type pcutPlan struct {
	after  string
	pause  bool
	jitter int
}

var pcutPlans = []pcutPlan{
	{after: "start", jitter: 5},
	{after: "committed", jitter: 3},
	{after: "step marked", pause: true},
	{after: "step copied", pause: true},
	{after: "step swapped", pause: true},
	{after: "step old-removed", pause: true},
	{after: "step renamed", pause: true},
	{after: "step marked", jitter: 3},
	{after: "step copied", jitter: 2},
	{after: "step swapped", jitter: 2},
	{after: "done", jitter: 10},
}

// TestPowerCutRepack cuts the power (crashfs, strict model; every other
// round tears the unsynced writes, crashfs.Options.TornSeed) during a
// repack, a gc after a snapshot's deletion, or a repack that keeps
// segments whole (linked into the shadow), of a store of 4 files of 75
// revisions and 2 snapshots, at the moments pcutPlans lists, and opens
// the store from what the disk held: it must open, read back every
// revision it held (for gc: every one gc keeps, and any other either
// exactly or not at all), keep its snapshots, verify clean, and take a
// second run of the same kind, after which no shadow is left.
func TestPowerCutRepack(t *testing.T) {
	start := time.Now()
	g := newPcutStore(t)
	// A repacked copy with a new revision after: a reuse=auto repack of
	// it keeps every segment but the last whole (repack_keep.go).
	kg := *g
	kg.h = newHistory(g.h.files, g.h.revs, g.h.size)
	maps.Copy(kg.h.texts, g.h.texts)
	kg.dir = filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(kg.dir, os.DirFS(g.dir)); err != nil {
		t.Fatal(err)
	}
	mustRepack(t, kg.dir, pcutRepackOptions(ReuseNever))
	kg.h.putNew(t, kg.dir, Config{SegmentSize: pcutSegment}, 1, 9, 20_000)
	kinds := []pcutKind{{g: g, reuse: ReuseNever}, {g: g, gc: true, keep: g.expect(t, GCPolicy{})}, {g: &kg, reuse: ReuseAuto}}
	rounds := len(kinds) * len(pcutPlans)
	if testing.Short() || raceEnabled { // under -race a round takes 4 times as long
		rounds = len(pcutPlans)
	}
	rounds = testutil.EnvNumber(t, envPowerCutRepackRounds, rounds)
	for round := range rounds {
		k := kinds[(round%len(pcutPlans)+round/len(pcutPlans))%len(kinds)]
		pcutRound(t, round, k)
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
	t.Logf("%d rounds, %v", rounds, time.Since(start))
}

// newPcutStore writes the store, into g.dir/store, with snapshot "keep"
// of g.refs and snapshot "gone" of revision 5 of file 2, which gc
// rounds delete.
func newPcutStore(t *testing.T) *gcStore {
	h := newHistory(4, 75, 6_000)
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(dir, Config{Create: true, SegmentSize: pcutSegment})
	if err != nil {
		t.Fatal(err)
	}
	h.write(t, s)
	g := &gcStore{h: h, dir: dir, live: map[index.FileID]bool{1: true, 3: true},
		refs: []index.RevID{{File: 2, Rev: 37}, {File: 4, Rev: 71}}}
	for i, sn := range []struct {
		name string
		revs map[string]index.RevID
	}{{"keep", map[string]index.RevID{"b": g.refs[0], "d": g.refs[1]}}, {"gone", map[string]index.RevID{"b": {File: 2, Rev: 5}}}} {
		root, trees := snapTree(t, sn.revs)
		req := SnapshotRequest{Name: sn.name, Time: time.Unix(int64(i), 0), Root: root, Trees: trees}
		if _, err := s.CreateSnapshot(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return g
}

// A pcutKind is a kind of run a round cuts: a repack with reuse (of
// the store g), or a gc of the store g after the deletion of snapshot
// "gone", which must keep keep.
type pcutKind struct {
	g     *gcStore
	gc    bool
	reuse Reuse
	keep  map[index.RevID]bool
}

func (k pcutKind) String() string {
	if k.gc {
		return "gc"
	}
	return "repack reuse=" + k.reuse.String()
}

// The helper's step to pause in, if any, and its reuse.
const (
	envPcutPause = "OBJSTORE_PCUT_PAUSE"
	envPcutReuse = "OBJSTORE_PCUT_REUSE"
)

// pcutSegment: small segments, so that the store has a few.
const pcutSegment = 8 << 10

func pcutRepackOptions(reuse Reuse) RepackOptions {
	return RepackOptions{Reuse: reuse, Jobs: 2, commitEvery: 20, SegmentSize: pcutSegment}
}

func pcutGCOptions() GCOptions {
	return GCOptions{
		Live:   func() (map[index.FileID]bool, error) { return map[index.FileID]bool{1: true, 3: true}, nil },
		Repack: pcutRepackOptions(ReuseNever),
	}
}

// helperPcut runs a repack (or deletes snapshot "gone" and runs a gc) of
// the store in dir, saying "start", "committed N of M" as the shadow
// commits, "step NAME" after each step of the switch, "deleted" and
// "done" once they return; then it waits to be killed.
func helperPcut(dir string, gc bool) error {
	pause := os.Getenv(envPcutPause)
	reuse, err := ParseReuse(os.Getenv(envPcutReuse))
	if err != nil {
		return err
	}
	ropt := pcutRepackOptions(reuse)
	ropt.Progress = printCommitted()
	ropt.stopAt = func(step string) error {
		fmt.Printf("step %s\n", step)
		if step == pause {
			select {} // until the power cut and the kill
		}
		return nil
	}
	fmt.Println("start")
	if !gc {
		_, err = Repack(context.Background(), dir, ropt)
	} else {
		var s *Store
		if s, err = Open(dir, Config{}); err == nil {
			err = errors.Join(s.DeleteSnapshot("gone"), s.Close())
		}
		if err == nil {
			fmt.Println("deleted")
			opt := pcutGCOptions()
			opt.Repack = ropt
			_, err = GC(context.Background(), dir, opt)
		}
	}
	if err != nil {
		return err
	}
	fmt.Println("done")
	select {}
}

// pcutRound copies the store into a crashfs mount, runs the helper on it,
// cuts the power as round's plan says and checks the disk it left.
func pcutRound(t *testing.T, round int, k pcutKind) {
	r := rand.New(rand.NewPCG(2027, uint64(round)))
	plan := pcutPlans[round%len(pcutPlans)]
	var torn uint64 // every other round, unsynced writes survive in part
	if round%2 == 1 {
		torn = uint64(round)
	}
	fsys := crashfs.MountT(t, crashfs.Options{From: filepath.Dir(k.g.dir), TornSeed: torn})
	dir := filepath.Join(fsys.Dir(), "store")
	pause := ""
	if plan.pause {
		pause = strings.TrimPrefix(plan.after, "step ")
	}
	t.Setenv(envPcutPause, pause)
	t.Setenv(envPcutReuse, k.reuse.String())
	role := "pcut-repack"
	if k.gc {
		role = "pcut-gc"
	}
	cmd, _, out, first := startHelper(t, role, dir)
	if first != "start" {
		t.Fatalf("round %d: helper said %q", round, first)
	}
	seen := make(chan struct{})
	var deleted, reached bool
	done := make(chan struct{})
	frac := 0.1 + 0.8*r.Float64() // of the revisions committed, for "committed"
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			deleted = deleted || line == "deleted"
			var n, total float64
			hit := plan.after != "committed" && line == plan.after
			if _, err := fmt.Sscanf(line, "committed %g of %g", &n, &total); err == nil && plan.after == "committed" {
				hit = n >= frac*total
			}
			if hit && !reached {
				reached = true
				close(seen)
			}
		}
	}()
	if plan.after != "start" {
		select {
		case <-seen:
		case <-done:
			t.Errorf("round %d: the helper ended before %q", round, plan.after)
		case <-time.After(60 * time.Second):
			t.Errorf("round %d: no %q from the helper in 60 s", round, plan.after)
		}
	}
	time.Sleep(time.Duration(r.IntN(plan.jitter+1)) * time.Millisecond)
	fsys.CrashT(t)
	cmd.Process.Kill()
	<-done
	cmd.Wait()
	img := fsys.MaterializeT(t)
	t.Logf("round %d: %v, cut %+v", round, k, plan)
	checkPcut(t, round, filepath.Join(img, "store"), k, deleted)
}

// checkPcut checks the store in dir after a power cut in a repack or gc
// (whose snapshot deletion returned if deleted).
func checkPcut(t *testing.T, round int, dir string, k pcutKind, deleted bool) {
	t.Helper()
	g, gc, keep := k.g, k.gc, k.keep
	var logs bytes.Buffer
	disk := listTree(filepath.Dir(dir))
	s, err := Open(dir, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("round %d: open after the power cut: %v\n%s\nthe disk held:\n%s", round, err, logs.String(), disk)
	}
	ctx := context.Background()
	bad := 0
	for id, want := range g.h.texts {
		got, err := s.Get(ctx, id)
		switch {
		case err == nil && !bytes.Equal(got, want):
			err = errors.New("reads back wrong")
		case err != nil && gc && !keep[id] && errors.Is(err, ErrNotFound):
			err = nil // removed, as gc may
		}
		if err != nil {
			if bad++; bad <= 3 {
				t.Errorf("round %d: %v lost: %v", round, id, err)
			}
		}
	}
	if bad > 0 {
		t.Errorf("round %d: %d of %d revisions lost", round, bad, len(g.h.texts))
	}
	for _, name := range []string{"keep", "gone"} {
		sn, err := s.Snapshot(name)
		if name == "gone" && deleted {
			if err == nil {
				t.Errorf("round %d: the deletion of snapshot gone returned but it is back", round)
			}
			continue
		}
		if err != nil {
			t.Errorf("round %d: snapshot %s lost: %v", round, name, err)
		} else if _, err := s.Tree(sn.Root.Tree); err != nil {
			t.Errorf("round %d: snapshot %s: %v", round, name, err)
		}
	}
	if n, err := s.Verify(ctx, func(p Problem) {
		if bad++; bad <= 3 {
			t.Errorf("round %d: verify: %v", round, p)
		}
	}); n != 0 || err != nil {
		t.Errorf("round %d: verify: %d problems, %v", round, n, err)
	}
	if gc && !deleted {
		if err := s.DeleteSnapshot("gone"); err != nil {
			t.Errorf("round %d: delete snapshot gone again: %v", round, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{filepath.Join(shadowName, switchName), doneName, oldSegsName} {
		if exists(filepath.Join(dir, name)) {
			t.Errorf("round %d: %s is still there after Open", round, name)
		}
	}
	if t.Failed() {
		t.Fatalf("round %d: the disk held:\n%s\nopen logged:\n%s", round, disk, logs.String())
	}
	// A second run on the store the power cut left.
	g2 := *g
	g2.dir = dir
	if !gc {
		mustRepack(t, dir, pcutRepackOptions(k.reuse))
		g.h.check(t, dir)
	} else {
		if _, err := GC(ctx, dir, pcutGCOptions()); err != nil {
			t.Fatalf("round %d: gc after the power cut: %v", round, err)
		}
		g2.checkAfter(t, keep)
	}
	for _, name := range []string{shadowName, doneName, oldSegsName} {
		if exists(filepath.Join(dir, name)) {
			t.Errorf("round %d: %s is still there after a second run", round, name)
		}
	}
}
