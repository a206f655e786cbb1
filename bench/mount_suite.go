package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

func mountSuite() Suite {
	return Suite{
		Name: "mount",
		Doc:  "M1-M6: native directory vs go-fuse loopback vs deltafs mount",
		Run:  runMountSuite,
		Children: map[string]ChildFunc{
			loopbackOp: childLoopback, "seqwrite": childSeqWrite, "seqread": childSeqRead,
			"randread": childRandRead, "randwrite": childRandWrite, "saves": childSaves,
			"revisions": childRevisions, "mkfiles": childMkfiles,
		},
	}
}

// phase is one timed step of a workload on one target.
type phase struct {
	wall, cpu, server time.Duration // server: CPU of the FUSE server process
	bytes             int64
}

// mWorkload is one benchmark of the mount suite.
type mWorkload struct {
	id, doc string
	phases  []string // in report order
	// run performs one repeat on a fresh target and returns its phases;
	// facts are named figures read after the target is torn down.
	run   func(e *Env, t *target) (map[string]phase, error)
	facts func(e *Env, t *target, r map[string]phase) (map[string]int64, error)
	// freshFS runs every target and repeat on a new file system of its
	// own (see mount_freshfs.go).
	freshFS bool
}

// mResult is a workload's medians per target kind.
type mResult struct {
	w     mWorkload
	by    map[fsKind]map[string]phase
	facts map[fsKind]map[string]int64
}

func runMountSuite(env *Env) (Report, error) {
	bin, err := env.buildDeltafs()
	if err != nil {
		return Report{}, err
	}
	rep := Report{Intro: mountIntro(env)}
	var results []mResult
	for _, w := range mountWorkloads(env) {
		if !env.Opts.selected(w.id) {
			continue
		}
		r, err := env.measureWorkload(w, bin)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", w.id, err)
		}
		results = append(results, r)
		rep.Tables = append(rep.Tables, r.table())
		// Log each table as soon as it is measured: a later failure must
		// not lose it.
		var b strings.Builder
		r.table().Markdown(&b)
		env.Logf("%s done:\n%s", w.id, b.String())
	}
	git, m4, notes, err := env.mountExtras(bin)
	if err != nil {
		return rep, err
	}
	if m4 != nil {
		rep.Tables = append(rep.Tables, m4.table())
	}
	rep.Tables = append(rep.Tables, mountTargets(results, git, m4))
	rep.Notes = append(notes, mountNotes()...)
	return rep, nil
}

// measureWorkload runs w -n times on each kind, each from a fresh
// target. The kinds take turns within each round, so that a machine that
// slows down or speeds up during the run (these shared machines do, by
// tens of percent within minutes) moves every kind's figures alike
// instead of the ratios: run kind by kind, the loopback's three M3 runs
// and deltafs's three came minutes apart. Each round starts one kind
// later (native, loopback, deltafs; then loopback, deltafs, native; ...):
// where a kind runs in the round moved its M3 git step by a third here
// (BENCHMARKS "M3 step by step ... in both orders"), and in a fixed
// order deltafs always ran last.
func (e *Env) measureWorkload(w mWorkload, bin string) (mResult, error) {
	r := mResult{w: w, by: map[fsKind]map[string]phase{}, facts: map[fsKind]map[string]int64{}}
	runs := map[fsKind][]map[string]phase{}
	facts := map[fsKind][]map[string]int64{}
	for i := range e.Opts.Runs {
		for j := range fsKinds {
			kind := fsKinds[(i+j)%len(fsKinds)]
			e.Logf("%s on %s, run %d/%d", w.id, kind, i+1, e.Opts.Runs)
			ph, f, err := e.oneRun(w, kind, bin)
			if err != nil {
				return r, fmt.Errorf("%s: %w", kind, err)
			}
			runs[kind], facts[kind] = append(runs[kind], ph), append(facts[kind], f)
		}
	}
	for _, kind := range fsKinds {
		r.by[kind], r.facts[kind] = medianPhases(runs[kind]), medianFacts(facts[kind])
	}
	return r, nil
}

func (e *Env) oneRun(w mWorkload, kind fsKind, bin string) (map[string]phase, map[string]int64, error) {
	t, err := e.setup(kind, bin, w.freshFS)
	if err != nil {
		return nil, nil, err
	}
	ph, err := w.run(e, t)
	t0 := time.Now()
	if terr := t.teardown(); err == nil {
		err = terr
	}
	if ph != nil {
		// For deltafs, unmounting waits until every pending revision is
		// recorded: the backlog the workload left behind.
		ph["unmount"] = phase{wall: time.Since(t0)}
	}
	var facts map[string]int64
	if err == nil && w.facts != nil {
		facts, err = w.facts(e, t, ph)
	}
	if rerr := t.remove(); err == nil {
		err = rerr
	}
	return ph, facts, err
}

// child runs a workload child in t's directory and adds the server's CPU.
func (e *Env) child(t *target, op string, args ...string) (phase, error) {
	c0 := t.serverCPU()
	s, err := e.Child("mount", op, append([]string{"-dir", t.dir}, args...)...)
	if err != nil {
		return phase{}, err
	}
	return phase{wall: s.Wall, cpu: s.CPU, server: t.serverCPU() - c0, bytes: s.Result.Bytes}, nil
}

// exec runs a program as one phase, measuring the whole process.
func (e *Env) exec(t *target, name string, args ...string) (phase, error) {
	c0 := t.serverCPU()
	s, err := e.Exec(name, args...)
	if err != nil {
		return phase{}, err
	}
	return phase{wall: s.Wall, cpu: s.CPU, server: t.serverCPU() - c0}, nil
}

func medianPhases(runs []map[string]phase) map[string]phase {
	out := map[string]phase{}
	for name := range runs[0] {
		var w, c, s []time.Duration
		for _, r := range runs {
			w, c, s = append(w, r[name].wall), append(c, r[name].cpu), append(s, r[name].server)
		}
		out[name] = phase{wall: median(w), cpu: median(c), server: median(s), bytes: runs[0][name].bytes}
	}
	return out
}

func medianFacts(runs []map[string]int64) map[string]int64 {
	out := map[string]int64{}
	if len(runs) == 0 || runs[0] == nil {
		return out
	}
	for k := range runs[0] {
		var xs []int64
		for _, r := range runs {
			xs = append(xs, r[k])
		}
		out[k] = median(xs)
	}
	return out
}

const (
	gib     = int64(1) << 30
	m2Small = 256 << 20
)

func mountWorkloads(env *Env) []mWorkload {
	s1 := workload.StoreS1()
	return []mWorkload{
		{id: "M1", doc: "sequential write (until fsync returns) then read (page cache dropped) of a 1 GiB file in 1 MiB blocks",
			phases: []string{"write", "write + recording", "read"}, run: runM1},
		{id: "M2", doc: "4 KiB random I/O: 16,384 reads (page cache dropped) and 16,384 writes + fsync on a 256 MiB file; " +
			"10,000 writes with an fsync every 100 on a 1 GiB file",
			phases: []string{"randread 256M", "randwrite 256M", "randwrite 1G fsync/100"}, run: runM2},
		{id: "M3", doc: fmt.Sprintf("a generated source tree of %d files in %d directories: untar, find, du, "+
			"git add -A && git commit, rm -rf (page cache warm)", m3Tree.Dirs*m3Tree.Files, m3Tree.Dirs+26),
			phases: []string{"untar", "find", "du -s", "git add+commit", "rm -rf", "unmount"}, run: runM3, freshFS: true},
		{id: "M5", doc: "atomic save (write temp file, close, rename over) of a 10 MiB text, 200 times, 3 small edits each",
			phases: []string{"200 saves", "unmount"}, run: runM5, facts: factsM5},
		{id: "M6", doc: s1.Doc + " written through the file system: each revision opened with O_TRUNC, written, closed; " +
			"one fsync at the end (first row), or an fsync after every revision (second)",
			phases: []string{"fsync at end", "fsync every revision", "unmount"}, run: runM6, facts: factsM6},
	}
}

func runM1(e *Env, t *target) (map[string]phase, error) {
	w, err := e.child(t, "seqwrite", "-size", strconv.FormatInt(gib, 10))
	if err != nil {
		return nil, err
	}
	// fsync returns once the data and the pending journal are durable; a
	// new file's first revision is recorded moments later (its hold-back,
	// see package mount). "write + recording" adds the time until the
	// revision is in the store: a snapshot waits for every pending
	// recording. Native and loopback have nothing to record.
	rec := w
	if t.kind == kindDeltafs {
		c0, t0 := t.serverCPU(), time.Now()
		t.settles++
		if err := os.Mkdir(filepath.Join(t.dir, ".snapshots", fmt.Sprintf("m1-recorded-%d", t.settles)), 0o755); err != nil {
			return nil, fmt.Errorf("M1: snapshot after the write: %w", err)
		}
		rec.wall += time.Since(t0)
		rec.server += t.serverCPU() - c0
	}
	t.settle() // a server still recording would fill the page cache again
	dropCaches()
	r, err := e.child(t, "seqread", "-size", strconv.FormatInt(gib, 10))
	return map[string]phase{"write": w, "write + recording": rec, "read": r}, err
}

func runM2(e *Env, t *target) (map[string]phase, error) {
	out := map[string]phase{}
	small := strconv.Itoa(m2Small)
	if _, err := e.child(t, "seqwrite", "-size", small); err != nil {
		return nil, err
	}
	t.settle() // the fill's recording is not part of the timed steps
	dropCaches()
	var err error
	if out["randread 256M"], err = e.child(t, "randread", "-size", small, "-ops", "16384"); err != nil {
		return nil, err
	}
	if out["randwrite 256M"], err = e.child(t, "randwrite", "-size", small, "-ops", "16384"); err != nil {
		return nil, err
	}
	big := strconv.FormatInt(gib, 10)
	if err := os.Remove(filepath.Join(t.dir, ioFile)); err != nil {
		return nil, err
	}
	if _, err := e.child(t, "seqwrite", "-size", big); err != nil {
		return nil, err
	}
	t.settle()
	out["randwrite 1G fsync/100"], err = e.child(t, "randwrite", "-size", big, "-ops", "10000", "-sync-every", "100")
	return out, err
}

func runM3(e *Env, t *target) (map[string]phase, error) {
	tarPath := filepath.Join(e.Work, "m3-tree.tar")
	if _, err := os.Stat(tarPath); err != nil {
		if _, _, err := m3Tree.writeTar(tarPath); err != nil {
			return nil, err
		}
	}
	tree := filepath.Join(t.dir, "tree")
	steps := []struct {
		name string
		argv []string
	}{
		{"untar", []string{"tar", "-xf", tarPath, "-C", t.dir}},
		{"find", []string{"find", tree}},
		{"du -s", []string{"du", "-s", tree}},
		{"git init", []string{"git", "init", "-q", tree}},
		// gc.auto=0: with 10,000 loose objects the commit would start a
		// detached "git gc --auto", unmeasured, racing the rm -rf after
		// it (seen failing with ENOTEMPTY on .git).
		{"git add+commit", []string{"sh", "-c", "cd " + tree + " && git add -A && " +
			"git -c gc.auto=0 -c user.name=bench -c user.email=bench@localhost commit -q -m tree"}},
		{"rm -rf", []string{"rm", "-rf", tree}},
	}
	out := map[string]phase{}
	for _, s := range steps {
		p, err := e.exec(t, s.argv[0], s.argv[1:]...)
		if err != nil {
			return nil, err
		}
		if s.name != "git init" {
			out[s.name] = p
		}
	}
	return out, nil
}

func runM5(e *Env, t *target) (map[string]phase, error) {
	s, err := e.Child("mount", "saves", "-dir", t.dir, "-size", strconv.Itoa(10<<20), "-saves", "200")
	if err != nil {
		return nil, err
	}
	var sum int64
	for _, d := range s.Result.Sizes["delta"] {
		sum += d
	}
	return map[string]phase{"200 saves": {wall: s.Wall, cpu: s.CPU, bytes: sum}}, nil
}

// factsM5 reads the deltafs store after unmounting: the growth past the
// first revision of the saved file, against the sum of the edits' deltas.
func factsM5(e *Env, t *target, r map[string]phase) (map[string]int64, error) {
	f := map[string]int64{"delta_sum": r["200 saves"].bytes}
	if t.kind != kindDeltafs {
		return f, nil
	}
	revs, growth, err := storeGrowth(e.ctx, t.store)
	f["revisions"], f["growth"] = revs, growth
	return f, err
}

// storeGrowth finds the file with the most revisions and returns their
// count and the stored bytes of all but its first revision.
func storeGrowth(ctx context.Context, dir string) (revs, growth int64, err error) {
	s, err := objstore.Open(dir, objstore.Config{ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	st, err := s.Stats(ctx)
	if err != nil {
		return 0, 0, err
	}
	for f := int64(1); f <= st.Files+1; f++ {
		var n, g int64
		err := s.Revisions(ctx, index.FileID(f), func(en index.Entry) error {
			if en.Rev > 0 {
				g += int64(en.Stored)
			}
			n++
			return nil
		})
		if err == nil && n > revs {
			revs, growth = n, g
		}
	}
	return revs, growth, nil
}

func runM6(e *Env, t *target) (map[string]phase, error) {
	out := map[string]phase{}
	var err error
	if out["fsync at end"], err = e.child(t, "revisions"); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(t.dir, "s1.txt")); err != nil {
		return nil, err
	}
	out["fsync every revision"], err = e.child(t, "revisions", "-sync-every", "1")
	return out, err
}

// factsM6 counts the revisions deltafs recorded (both runs, one file each).
func factsM6(e *Env, t *target, _ map[string]phase) (map[string]int64, error) {
	if t.kind != kindDeltafs {
		return nil, nil
	}
	s, err := objstore.Open(t.store, objstore.Config{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	st, err := s.Stats(e.ctx)
	if err != nil {
		return nil, err
	}
	return map[string]int64{"revisions": st.Revisions, "stored": int64(st.StoredBytes)}, nil
}
