package objstore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// The test binary re-executes itself to run a repack that the test kills:
// REPACK_HELPER_DIR names the store.
const repackHelperEnv = "REPACK_HELPER_DIR"

// repackHelperReuse, set to "auto", makes the helper repack with
// --reuse=auto instead of killOptions' never.
const repackHelperReuse = "REPACK_HELPER_REUSE"

// killOptions are the options of every repack in the kill loop, so each
// run resumes the last one's shadow.
func killOptions() RepackOptions {
	return RepackOptions{Reuse: ReuseNever, Jobs: 1, commitEvery: 5, SegmentSize: 8 << 10}
}

func TestRepackHelperProcess(t *testing.T) {
	dir := os.Getenv(repackHelperEnv)
	if dir == "" {
		t.Skip("only runs as a helper subprocess")
	}
	opt := killOptions()
	if os.Getenv(repackHelperReuse) == "auto" {
		opt.Reuse = ReuseAuto
	}
	last := int64(-1)
	opt.Progress = func(p RepackProgress) {
		if p.Committed != last {
			last = p.Committed
			fmt.Printf("committed %d of %d\n", p.Committed, p.Revisions)
		}
	}
	fmt.Println("start")
	rep, err := Repack(context.Background(), dir, opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	fmt.Printf("done %d\n", rep.Revisions)
	os.Exit(0)
}

// startRepackHelper starts a repack subprocess on dir and returns it with
// its stdout lines, after its first one.
func startRepackHelper(t *testing.T, dir string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRepackHelperProcess$")
	cmd.Env = append(append(os.Environ(), repackHelperEnv+"="+dir), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "start" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("repack helper did not start: %q", sc.Text())
	}
	return cmd, sc
}

// killAfter SIGKILLs the helper after wait (or lets it finish first) and
// reports whether it was killed.
func killAfter(t *testing.T, cmd *exec.Cmd, sc *bufio.Scanner, wait time.Duration) bool {
	t.Helper()
	done := make(chan bool)
	go func() {
		finished := false
		for sc.Scan() {
			finished = finished || strings.HasPrefix(sc.Text(), "done ")
		}
		done <- finished
	}()
	time.Sleep(wait)
	cmd.Process.Signal(syscall.SIGKILL)
	finished := <-done
	err := cmd.Wait()
	if !finished && (err == nil || !strings.Contains(err.Error(), "killed")) {
		t.Fatalf("repack helper failed on its own: %v", err)
	}
	return !finished
}

// TestRepackKillLoop SIGKILLs repacks at random moments; after each kill the
// store opens, reads every revision byte-identically and verifies clean.
// A last repack killed mid-way is then resumed, not restarted.
func TestRepackKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("kill loop skipped in -short")
	}
	h, dir := newHistoryStore(t, Config{P1Only: true, MaxChainLen: 4, SegmentSize: 64 << 10}, 3, 30, 20_000)
	r := rand.New(rand.NewPCG(6, 2026))
	const kills, maxRounds = 20, 60
	start := time.Now()
	round, killed, switched := 0, 0, 0
	for ; killed < kills && round < maxRounds; round++ {
		cmd, sc := startRepackHelper(t, dir)
		// Odd rounds wait longer and longer, so that some get through a
		// whole repack (each resumes the last) and kills land in the switch
		// too; even rounds kill early.
		maxWait := 150
		if round%2 == 1 && !raceEnabled { // under -race the helper's start alone takes longer
			maxWait = 100 + 60*round
		}
		if killAfter(t, cmd, sc, time.Duration(r.IntN(maxWait))*time.Millisecond) {
			killed++
		}
		if exists(filepath.Join(dir, shadowName, switchName)) || !exists(filepath.Join(dir, shadowName)) {
			switched++ // killed in the switch, or finished
		}
		h.check(t, dir)
		if t.Failed() {
			t.Fatalf("round %d", round)
		}
	}
	// TestOpenFinishesSwitch ends the switch after each step for certain;
	// here, without the race detector, some kills land in it at random.
	if killed < kills || switched == 0 && !raceEnabled {
		t.Errorf("%d repacks killed in %d rounds, %d reached the switch: the loop did not cover both", killed, round, switched)
	}
	// Kill one once it has committed some revisions but not half (a run
	// that only finishes an already complete shadow does not count).
	for try := 0; !killMidway(t, dir); try++ {
		if try == 3 {
			t.Fatal("no repack could be killed mid-way")
		}
	}
	h.check(t, dir)
	rep := mustRepack(t, dir, killOptions())
	if !rep.Resumed || rep.ResumedRevisions == 0 || rep.ResumedRevisions+rep.Redeltaed+rep.Unchanged != rep.Revisions {
		t.Errorf("the last repack did not resume: %+v", rep)
	}
	h.check(t, dir)
	t.Logf("%d rounds, %d killed, %d reached the switch, %v; last run resumed %d of %d revisions", round, killed, switched, time.Since(start), rep.ResumedRevisions, rep.Revisions)
	killWhole(t, h, dir, r)
}

// killWhole kills --reuse=auto repacks of the repacked store, which leave
// it as it is (repack_plan.go), at random moments, over an interrupted
// run's shadow at first: the store reads back after each, its segment
// files untouched, and the shadow is gone once a run got through.
func killWhole(t *testing.T, h *history, dir string, r *rand.Rand) {
	segs := segFiles(t, dir)
	for try := 0; !killMidway(t, dir); try++ { // leave a shadow behind
		if try == 3 {
			t.Fatal("no repack could be killed mid-way")
		}
	}
	finished := 0
	for round := range 5 {
		cmd, sc := startRepackHelper(t, dir, repackHelperReuse+"=auto")
		if !killAfter(t, cmd, sc, time.Duration(r.IntN(60*(round+1)))*time.Millisecond) {
			finished++
		}
		h.check(t, dir)
		if got := segFiles(t, dir); !mapsEqual(got, segs) {
			t.Fatalf("round %d: segment files changed: %v -> %v", round, segs, got)
		}
	}
	if rep := mustRepack(t, dir, RepackOptions{Reuse: ReuseAuto, SegmentSize: 8 << 10}); !rep.Whole {
		t.Errorf("auto on the repacked store: %+v", rep)
	}
	if exists(filepath.Join(dir, shadowName)) {
		t.Error("the interrupted never run's shadow is still there")
	}
	h.check(t, dir)
	t.Logf("reuse=auto, left whole: %d of 5 runs finished before the kill", finished)
	killKept(t, h, dir, r)
}

// killKept writes a fulltext into the repacked store, then kills
// --reuse=auto repacks, which keep every other segment whole (linked into
// the shadow, repack_keep.go), at random moments, the switch included;
// the store reads back after each, and the last run leaves the kept
// segments' files as they were.
func killKept(t *testing.T, h *history, dir string, r *rand.Rand) {
	s, err := Open(dir, Config{SegmentSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	id := index.RevID{File: 1, Rev: index.Rev(h.revs)}
	h.texts[id] = genText(rand.New(rand.NewPCG(9, 9)), 30_000)
	mustPut(t, s, PutRequest{File: 1, Data: bytes.Clone(h.texts[id]), P1: index.RevID{File: 1, Rev: id.Rev - 1}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segFiles(t, dir)
	killed := 0
	for round := 0; round < 8; round++ {
		cmd, sc := startRepackHelper(t, dir, repackHelperReuse+"=auto")
		if killAfter(t, cmd, sc, time.Duration(r.IntN(40*(round+1)))*time.Millisecond) {
			killed++
		}
		h.check(t, dir)
	}
	rep := mustRepack(t, dir, RepackOptions{Reuse: ReuseAuto, Jobs: 1, commitEvery: 5, SegmentSize: 8 << 10})
	h.check(t, dir)
	kept := 0
	after := segFiles(t, dir)
	for name, fi := range segs {
		if after[name] == fi {
			kept++
		}
	}
	if kept == 0 || kept == len(segs) && !rep.Whole {
		t.Errorf("%d of %d segments kept; last run %+v", kept, len(segs), rep)
	}
	t.Logf("reuse=auto keeping segments: %d of 8 runs killed; %d of %d segments kept", killed, kept, len(segs))
}

// killMidway runs a repack and kills it once it has committed at least one
// revision and less than half of them; false if it finished first.
func killMidway(t *testing.T, dir string) bool {
	cmd, sc := startRepackHelper(t, dir)
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGKILL)
	for sc.Scan() {
		var n, total int64
		if _, err := fmt.Sscanf(sc.Text(), "committed %d of %d", &n, &total); err == nil && n > 0 && n < total/2 {
			cmd.Process.Signal(syscall.SIGKILL)
			for sc.Scan() {
			}
			return true
		}
	}
	return false
}
