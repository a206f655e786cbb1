package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// H1: the history of one file of 10,000 revisions, listed through the
// mount (ls .history/FILE/) and by deltafs log, in a store of 1,000 other
// files of 100 revisions each and 500 snapshots; then again with 10x the
// other files and snapshots, to show that the cost is the file's own.

var h1Shapes = []histShape{
	{targetRevs: 10_000, others: 1_000, otherRevs: 100, snaps: 500},
	{targetRevs: 10_000, others: 10_000, otherRevs: 100, snaps: 5_000},
}

// h1Samples is how many times each command runs per store: enough for a
// p99 that is not just the maximum.
const h1Samples = 200

// h1Latency is one command's figures on one store.
type h1Latency struct {
	first     time.Duration // the first run after mounting: nothing cached by the mount
	p50, p99  time.Duration
	serverCPU time.Duration // the mount's CPU per call
	rssGrowth int64         // the mount's peak RSS over its RSS before the calls
}

type h1Result struct {
	shape   histShape
	build   time.Duration
	ls, log h1Latency
	hasLog  bool
}

func runH1(e *Env, bin string) (Report, error) {
	help, err := exec.Command(bin, "log", "--help").CombinedOutput()
	hasLog := err == nil && strings.Contains(string(help), "deltafs log")
	var res []h1Result
	for _, sh := range h1Shapes {
		r, err := e.h1Run(bin, sh, hasLog)
		if err != nil {
			return Report{}, fmt.Errorf("%d other files: %w", sh.others, err)
		}
		res = append(res, r)
	}
	rep := Report{Tables: []Table{h1Table(res), h1Targets(res)}}
	if !hasLog {
		rep.Notes = append(rep.Notes, "H1: `deltafs log` is not in this build; not measured.")
	}
	return rep, nil
}

// h1Run builds a store of shape sh, mounts it and measures.
func (e *Env) h1Run(bin string, sh histShape, hasLog bool) (h1Result, error) {
	r := h1Result{shape: sh, hasLog: hasLog}
	base, err := e.freshDir(filepath.Join("history", fmt.Sprintf("h1-%d", sh.others)))
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(base)
	store, mnt := filepath.Join(base, "store"), filepath.Join(base, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return r, err
	}
	e.Logf("H1: building a store of %d other files x %d revisions, %d snapshots, and %s with %d revisions",
		sh.others, sh.otherRevs, sh.snaps, histTarget, sh.targetRevs)
	t0 := time.Now()
	if err := buildHistStore(e.ctx, store, sh, e.Logf); err != nil {
		return r, fmt.Errorf("build store: %w", err)
	}
	r.build = time.Since(t0)
	t := &target{kind: kindDeltafs, base: base, dir: mnt, store: store,
		cmd: exec.Command(bin, "mount", "--shutdown-timeout", "20m", store, mnt)}
	if err := t.start(); err != nil {
		return r, err
	}
	r, err = e.h1Mounted(t, r, bin)
	return r, errors.Join(err, t.teardown())
}

// h1Mounted measures on the mounted store of t.
func (e *Env) h1Mounted(t *target, r h1Result, bin string) (h1Result, error) {
	sh, mnt := r.shape, t.dir
	var err error
	hist := filepath.Join(mnt, ".history", histTarget)
	e.Logf("H1: ls %s x%d", hist, h1Samples)
	if r.ls, err = e.h1Measure(t, "ls", hist); err != nil {
		return r, err
	}
	if ents, err := os.ReadDir(hist); err != nil || len(ents) != sh.targetRevs {
		return r, fmt.Errorf("ls %s: %d entries, %v; want %d", hist, len(ents), err, sh.targetRevs)
	}
	if r.hasLog {
		e.Logf("H1: deltafs log x%d", h1Samples)
		r.log, err = e.h1Measure(t, bin, "log", filepath.Join(mnt, histTarget))
	}
	return r, err
}

// h1Measure runs a command h1Samples times and reads the mount's CPU and
// peak RSS around the runs (the peak is reset first: clear_refs 5).
func (e *Env) h1Measure(t *target, name string, args ...string) (h1Latency, error) {
	pid := strconv.Itoa(t.cmd.Process.Pid)
	if err := os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0); err != nil {
		return h1Latency{}, fmt.Errorf("reset the mount's peak RSS: %w", err)
	}
	rss0 := procKB(pid, "VmRSS:")
	anon0, file0 := procKB(pid, "RssAnon:"), procKB(pid, "RssFile:")
	c0 := t.serverCPU()
	walls := make([]int64, 0, h1Samples)
	for range h1Samples {
		s, err := e.Exec(name, args...)
		if err != nil {
			return h1Latency{}, err
		}
		walls = append(walls, int64(s.Wall))
	}
	l := h1Latency{first: time.Duration(walls[0])}
	l.p50, l.p99, _ = percentiles(walls)
	l.serverCPU = (t.serverCPU() - c0) / h1Samples
	l.rssGrowth = procKB(pid, "VmHWM:") - rss0
	e.Logf("H1: %s: first %s, p50 %s, p99 %s, mount CPU %s per call, mount RSS growth %s (after the runs: anonymous %+.1f MiB, mapped files %+.1f MiB)",
		name, ms(l.first), ms(l.p50), ms(l.p99), ms(l.serverCPU), mibs(l.rssGrowth),
		float64(procKB(pid, "RssAnon:")-anon0)/(1<<20), float64(procKB(pid, "RssFile:")-file0)/(1<<20))
	return l, nil
}

// procKB reads a "kB" field of /proc/PID/status, in bytes; 0 if unknown.
func procKB(pid, key string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	var kb int64
	if _, err := fmt.Sscanf(field(string(b), key), "%d kB", &kb); err != nil {
		return 0
	}
	return kb * 1024
}

func (s histShape) String() string {
	return fmt.Sprintf("%s other files x %d revisions, %s snapshots", thousands(s.others), s.otherRevs, thousands(s.snaps))
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func h1Table(res []h1Result) Table {
	t := Table{Title: "H1: history of one file of 10,000 revisions",
		Doc: fmt.Sprintf("Whole-process wall time of each command (%d runs: the first after mounting, p50, p99), the mount's CPU per call "+
			"(from /proc/PID/stat over all runs) and the mount's peak RSS growth over its RSS before the runs "+
			"(VmHWM after clear_refs). The store is built with objstore directly (build column), then mounted with "+
			"`deltafs mount`.", h1Samples),
		Header: []string{"store", "build", "command", "first", "p50", "p99", "mount CPU/call", "mount RSS growth"}}
	for _, r := range res {
		t.Add(r.shape.String(), r.build.Round(time.Second).String(), "ls .history/"+histTarget+"/",
			ms(r.ls.first), ms(r.ls.p50), ms(r.ls.p99), ms(r.ls.serverCPU), mibs(r.ls.rssGrowth))
		if r.hasLog {
			t.Add("", "", "deltafs log "+histTarget, ms(r.log.first), ms(r.log.p50), ms(r.log.p99), ms(r.log.serverCPU), mibs(r.log.rssGrowth))
		}
	}
	return t
}

func mibs(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func h1Targets(res []h1Result) Table {
	t := Table{Title: "Targets (issue 5): H1", Header: []string{"target", "measured", "goal", "met"}}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	for _, r := range res {
		cmds := []struct {
			name string
			l    h1Latency
		}{{"ls .history", r.ls}}
		if r.hasLog {
			cmds = append(cmds, struct {
				name string
				l    h1Latency
			}{"deltafs log", r.log})
		}
		for _, c := range cmds {
			t.Add(fmt.Sprintf("%s, %s others: time", c.name, thousands(r.shape.others)),
				fmt.Sprintf("p50 %s (first %s, p99 %s)", ms(c.l.p50), ms(c.l.first), ms(c.l.p99)), "p50 < 50 ms",
				yes(c.l.p50 < 50*time.Millisecond))
			t.Add(fmt.Sprintf("%s, %s others: mount RSS growth", c.name, thousands(r.shape.others)),
				mibs(c.l.rssGrowth), "< 10 MiB", yes(c.l.rssGrowth < 10<<20))
		}
	}
	if len(res) == 2 {
		a, b := res[0], res[1]
		ratio := func(x, y time.Duration) string {
			if x <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.2fx", float64(y)/float64(x))
		}
		t.Add("ls .history with 10x other files and snapshots",
			fmt.Sprintf("p50 %s, mount CPU %s", ratio(a.ls.p50, b.ls.p50), ratio(a.ls.serverCPU, b.ls.serverCPU)),
			"independent (about 1x)", yes(b.ls.p50 < a.ls.p50*3/2 && b.ls.serverCPU < a.ls.serverCPU*3/2))
		if a.hasLog {
			t.Add("deltafs log with 10x other files and snapshots",
				fmt.Sprintf("p50 %s, mount CPU %s", ratio(a.log.p50, b.log.p50), ratio(a.log.serverCPU, b.log.serverCPU)),
				"independent (about 1x)", yes(b.log.p50 < a.log.p50*3/2 && b.log.serverCPU < a.log.serverCPU*3/2))
		}
	}
	return t
}
