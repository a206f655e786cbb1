package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// M4: snapshots. Measured only when mkdir MNT/.snapshots/NAME works on
// the deltafs build under test (native and loopback have no snapshots).

// m4Trees are the tree sizes whose snapshot time M4 compares.
var m4Trees = []int{1_000, 10_000, 100_000}

// m4Snapshots is how many snapshots `ls .snapshots` lists.
const m4Snapshots = 10_000

// m4Rounds is the fewest snapshots M4 times per tree, whatever -n says.
// The first few after the tree is written share the machine with the
// store's own background work on what was just written (at 100,000 new
// files, badger's compactions: 10-18 ms against 3.4-4.4 ms for the
// later ones in a quiet run, 17:47 UTC), which three samples cannot tell
// from the cost of the tree's size; the table shows the median and, so
// that the slow ones are not hidden, the first and the slowest.
const m4Rounds = 12

// m4Result: per tree size, the median, first and slowest snapshot
// creation time, and the time of `ls .snapshots` with m4Snapshots
// snapshots.
type m4Result struct {
	create map[int]time.Duration
	first  map[int]time.Duration
	worst  map[int]time.Duration
	list   time.Duration
}

// childMkfiles creates -ops small files in directories of 100 under dir.
func childMkfiles(_ context.Context, args []string) (ChildResult, error) {
	a, err := parseIOArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	var t Timer
	t.Start()
	for i := range a.ops {
		d := filepath.Join(a.dir, "tree", fmt.Sprintf("d%04d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return ChildResult{}, err
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", i%100)), []byte(strconv.Itoa(i)+"\n"), 0o644); err != nil {
			return ChildResult{}, err
		}
	}
	t.Stop()
	return t.Result(int64(a.ops)), nil
}

// touch10 rewrites 10 of the tree's n files (n a multiple of 1,000),
// each in a directory of its own, spread over the tree (round k picks
// other ones). The same shape at every size: until 2026-11-30 16:10 the
// 10 files of the 1,000-file tree all fell in one directory and those of
// the larger trees in 10, so M4's ratio compared one directory
// serialised again with ten, not tree sizes.
func touch10(dir string, n, k int) error {
	step := n / 1000 // a tenth of the tree's n/100 directories
	for j := range 10 {
		d, f := j*step+k%step, k/step%100
		p := filepath.Join(dir, "tree", fmt.Sprintf("d%04d", d), fmt.Sprintf("f%03d", f))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("round %d\n", k)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// snapshot times mkdir MNT/.snapshots/name.
func snapshot(mnt, name string) (time.Duration, error) {
	t0 := time.Now()
	err := os.Mkdir(filepath.Join(mnt, ".snapshots", name), 0o755)
	return time.Since(t0), err
}

func (e *Env) runM4(bin string) (m4Result, error) {
	r := m4Result{create: map[int]time.Duration{}, first: map[int]time.Duration{}, worst: map[int]time.Duration{}}
	for _, n := range m4Trees {
		times, err := e.m4Tree(bin, n)
		if err != nil {
			return r, fmt.Errorf("M4 %d files: %w", n, err)
		}
		r.create[n], r.first[n], r.worst[n] = median(times), times[0], slices.Max(times)
	}
	var err error
	r.list, err = e.m4List(bin)
	return r, err
}

// m4Tree builds a tree of n files, takes a first snapshot, then
// max(-n, m4Rounds) times changes 10 files and times the next snapshot.
func (e *Env) m4Tree(bin string, n int) ([]time.Duration, error) {
	t, err := e.setup(kindDeltafs, bin, false)
	if err != nil {
		return nil, err
	}
	defer t.remove()
	defer t.teardown()
	e.Logf("M4: %d files", n)
	if _, err := e.child(t, "mkfiles", "-ops", strconv.Itoa(n)); err != nil {
		return nil, err
	}
	if _, err := snapshot(t.dir, "base"); err != nil {
		return nil, err
	}
	var times []time.Duration
	for k := range max(e.Opts.Runs, m4Rounds) {
		if err := touch10(t.dir, n, k); err != nil {
			return nil, err
		}
		d, err := snapshot(t.dir, "s"+strconv.Itoa(k))
		if err != nil {
			return nil, err
		}
		times = append(times, d)
	}
	return times, nil
}

// m4List takes m4Snapshots snapshots of a small tree and times `ls`.
func (e *Env) m4List(bin string) (time.Duration, error) {
	t, err := e.setup(kindDeltafs, bin, false)
	if err != nil {
		return 0, err
	}
	defer t.remove()
	defer t.teardown()
	if _, err := e.child(t, "mkfiles", "-ops", "100"); err != nil {
		return 0, err
	}
	e.Logf("M4: %d snapshots", m4Snapshots)
	for i := range m4Snapshots {
		if _, err := snapshot(t.dir, fmt.Sprintf("snap%05d", i)); err != nil {
			return 0, err
		}
	}
	sum, err := Repeat(e.Opts.Runs, func() (Sample, error) {
		return e.Exec("ls", filepath.Join(t.dir, ".snapshots"))
	})
	return sum.Wall, err
}

func (r m4Result) table() Table {
	t := Table{Title: "M4: snapshots (deltafs only)",
		Doc: fmt.Sprintf("mkdir MNT/.snapshots/NAME after changing 10 files (in 10 directories, not fsynced) since the previous snapshot, "+
			"at least %d snapshots a tree, the first right after the tree is written (median, first, slowest), and `ls .snapshots` (whole process) with 10,000 snapshots.", m4Rounds),
		Header: []string{"tree", "snapshot time", "first", "slowest"}}
	for _, n := range m4Trees {
		t.Add(fmt.Sprintf("%d files", n), ms(r.create[n]), ms(r.first[n]), ms(r.worst[n]))
	}
	t.Add(fmt.Sprintf("ls .snapshots, %d snapshots", m4Snapshots), ms(r.list), "", "")
	return t
}
