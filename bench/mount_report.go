package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
)

func mountIntro(env *Env) []string {
	return []string{
		"Three file systems on the same disk in one run: a plain directory (native), a go-fuse " +
			"loopback mount (`fs.NewLoopbackRoot` + `fs.Mount` with nil options: go-fuse's defaults, " +
			"1 s entry and attribute timeouts, mounted through fusermount3) served by the bench binary " +
			"in its own process, and `deltafs mount STORE MNT` built from this checkout. Every repeat " +
			"starts from a fresh directory, backing directory or store, and a fresh mount; M3's on a " +
			"fresh ext4 file system of its own (an 8 GiB image made by mkfs.ext4 with its defaults, " +
			"mounted by loop on the same disk), so that no target inherits the inodes another freed.",
		fmt.Sprintf("Workloads are driven by the bench binary in a child process (or by the real tar, find, du, "+
			"git, rm), timed from the first open to the last close or fsync. Medians of %d runs; the three take turns within each round, each round starting one kind later. "+
			"\"vs loopback\" is loopback time / deltafs time: above 1 deltafs is faster. server CPU is the "+
			"user+system time the FUSE server process used during the step (/proc/PID/stat); deltafs keeps "+
			"recording after a step returns unless the step ends with fsync.", env.Opts.Runs),
	}
}

// rate renders a phase as throughput (MB/s) for byte workloads, IOPS for
// 4 KiB random I/O, and seconds otherwise.
func rate(name string, p phase) string {
	switch {
	case strings.HasPrefix(name, "rand"):
		return fmt.Sprintf("%.0f IOPS", float64(p.bytes/4096)/p.wall.Seconds())
	case name == "write" || name == "read":
		return fmt.Sprintf("%.0f MB/s", MBps(p.bytes, p.wall))
	}
	return secs(p.wall)
}

// speedup is how many times faster b is than a (a's time / b's).
func speedup(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return a.Seconds() / b.Seconds()
}

func (r mResult) table() Table {
	t := Table{Title: r.w.id + ": " + r.w.doc,
		Header: []string{"step", "native", "loopback", "deltafs", "vs loopback", "loopback vs native",
			"server CPU loopback", "server CPU deltafs"}}
	for _, name := range r.w.phases {
		n, l, d := r.by[kindNative][name], r.by[kindLoopback][name], r.by[kindDeltafs][name]
		t.Add(name, rate(name, n), rate(name, l), rate(name, d),
			fmt.Sprintf("%.2f", speedup(l.wall, d.wall)), fmt.Sprintf("%.2f", speedup(n.wall, l.wall)),
			secs(l.server), secs(d.server))
	}
	if r.w.id == "M3" {
		var n, l, d time.Duration
		for _, name := range r.w.phases[:5] { // without the unmount
			n, l, d = n+r.by[kindNative][name].wall, l+r.by[kindLoopback][name].wall, d+r.by[kindDeltafs][name].wall
		}
		t.Add("total (without unmount)", secs(n), secs(l), secs(d), fmt.Sprintf("%.2f", speedup(l, d)), fmt.Sprintf("%.2f", speedup(n, l)), "", "")
	}
	if f := r.facts[kindDeltafs]; r.w.id == "M5" && f != nil {
		t.Doc = fmt.Sprintf("deltafs store growth past the first revision: %s over %d revisions of the file; "+
			"sum of the 200 edits' deltas as the store would compress them: %s (ratio %.2f).",
			mb(f["growth"]), f["revisions"], mb(f["delta_sum"]), ratio(f["growth"], f["delta_sum"]))
	}
	if f := r.facts[kindDeltafs]; r.w.id == "M6" && f != nil {
		t.Doc = fmt.Sprintf("deltafs recorded %d revisions over both runs (%d written), %s stored.",
			f["revisions"], 2*(workload.StoreS1().Steps+1), mb(f["stored"]))
	}
	return t
}

// mountExtras measures git fast-import of M6's revisions (the M6
// baseline) and, when snapshots work, M4.
func (e *Env) mountExtras(bin string) (time.Duration, *m4Result, []string, error) {
	var notes []string
	var m4 *m4Result
	var git time.Duration
	if e.Opts.selected("M6") && len(lookMissing([]string{"git"})) == 0 {
		repo, err := e.freshDir("mount-git")
		if err != nil {
			return 0, nil, nil, err
		}
		e.Logf("M6: git fast-import --depth=2000 of the same revisions, x%d", e.Opts.VCSRuns)
		sum, err := Repeat(e.Opts.VCSRuns, func() (Sample, error) {
			os.RemoveAll(repo)
			return e.Child("store", "gitimport", append([]string{"-dir", repo}, chainFlags(workload.StoreS1())...)...)
		})
		if err != nil {
			return 0, nil, nil, err
		}
		git = sum.Wall
		notes = append(notes, fmt.Sprintf("M6 baseline: git fast-import --depth=2000 of the same 600 revisions took %s wall, %s CPU (%d run(s)).",
			secs(sum.Wall), secs(sum.CPU), e.Opts.VCSRuns))
	}
	if e.Opts.selected("M4") {
		if why := e.probeSnapshots(bin); why != "" {
			notes = append(notes, "M4 (snapshots): "+why)
		} else {
			r, err := e.runM4(bin)
			if err != nil {
				notes = append(notes, "M4 (snapshots) failed: "+err.Error())
			} else {
				m4 = &r
			}
		}
	}
	return git, m4, notes, nil
}

// probeSnapshots tries mkdir MNT/.snapshots/NAME on a fresh deltafs mount
// and says why M4 cannot run, or "" if it can.
func (e *Env) probeSnapshots(bin string) string {
	t, err := e.setup(kindDeltafs, bin, false)
	if err != nil {
		return "not measured: " + err.Error()
	}
	defer t.remove()
	defer t.teardown()
	if err := os.WriteFile(filepath.Join(t.dir, "f"), []byte("x"), 0o644); err != nil {
		return "not measured: " + err.Error()
	}
	err = os.Mkdir(filepath.Join(t.dir, ".snapshots", "probe"), 0o755)
	if err != nil {
		return fmt.Sprintf("not measured: `mkdir MNT/.snapshots/probe` fails on this build (%v).", errors.Unwrap(err))
	}
	return ""
}

func mountNotes() []string {
	return []string{
		"Cold reads (M1 read, M2 randread) follow `sync; echo 3 > /proc/sys/vm/drop_caches`, which empties the page cache of the FUSE files and of the backing files alike.",
		"Both mounts serve opened files with FUSE passthrough when run as root (the kernel reads and writes the backing file directly): the go-fuse loopback every open (its LoopbackFile gives the kernel its descriptor), deltafs its read-only opens and the writable opens that start a file over (create, O_TRUNC), whose change is recorded whole anyway; other writers go through the server, which sees their written ranges.",
	}
}

// mountTargets checks the targets of issue 4.
func mountTargets(results []mResult, git time.Duration, m4 *m4Result) Table {
	t := Table{Title: "Targets (issue 4)", Header: []string{"target", "measured", "goal", "met"}}
	vs := func(r mResult, phase string) float64 {
		return speedup(r.by[kindLoopback][phase].wall, r.by[kindDeltafs][phase].wall)
	}
	for _, r := range results {
		switch r.w.id {
		case "M1":
			t.Add("M1 read vs loopback", fmt.Sprintf("%.2f", vs(r, "read")), ">= 0.90", yes(vs(r, "read") >= 0.9))
			t.Add("M1 write (until fsync) vs loopback", fmt.Sprintf("%.2f", vs(r, "write")), ">= 0.60", yes(vs(r, "write") >= 0.6))
			t.Add("M1 write + recording vs loopback", fmt.Sprintf("%.2f", vs(r, "write + recording")), ">= 0.60", yes(vs(r, "write + recording") >= 0.6))
		case "M2":
			for _, p := range r.w.phases {
				goal := 0.6
				if strings.HasPrefix(p, "randread") {
					goal = 0.9
				}
				t.Add("M2 "+p+" vs loopback", fmt.Sprintf("%.2f", vs(r, p)), fmt.Sprintf(">= %.2f", goal), yes(vs(r, p) >= goal))
			}
		case "M3":
			for _, p := range r.w.phases[:5] {
				t.Add("M3 "+p+" vs loopback", fmt.Sprintf("%.2f", vs(r, p)), ">= 1.00", yes(vs(r, p) >= 1))
			}
		case "M5":
			f := r.facts[kindDeltafs]
			q := ratio(f["growth"], f["delta_sum"])
			t.Add("M5 store growth / sum of edit deltas", fmt.Sprintf("%s / %s = %.2f", mb(f["growth"]), mb(f["delta_sum"]), q), "<= 2", yes(q <= 2))
		case "M6":
			d, l := r.by[kindDeltafs]["fsync at end"].wall, r.by[kindLoopback]["fsync at end"].wall
			q := d.Seconds() / l.Seconds()
			t.Add("M6 fsync at end: deltafs / loopback time", fmt.Sprintf("%s / %s = %.2f", secs(d), secs(l), q), "<= 1.5", yes(q <= 1.5))
			if git > 0 {
				x := speedup(git, d)
				t.Add("M6 fsync at end vs git fast-import", fmt.Sprintf("%s vs %s = %.1fx faster", secs(d), secs(git), x), ">= 5x", yes(x >= 5))
			}
		}
	}
	if m4 == nil {
		t.Add("M4 snapshots", "not measured (see notes)", "< 100 ms, flat in tree size", "-")
		return t
	}
	big, small := m4.create[m4Trees[len(m4Trees)-1]], m4.create[m4Trees[0]]
	t.Add("M4 snapshot, 100,000 files", ms(big), "< 100 ms", yes(big < 100*time.Millisecond))
	t.Add("M4 snapshot, 100,000 / 1,000 files", fmt.Sprintf("%.2f", speedup(big, small)), "<= 2", yes(big <= 2*small))
	t.Add("M4 ls .snapshots, 10,000 snapshots", ms(m4.list), "< 50 ms", yes(m4.list < 50*time.Millisecond))
	return t
}
