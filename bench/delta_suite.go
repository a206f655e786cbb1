package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/deltafs/deltafs/bench/workload"
)

func deltaSuite() Suite {
	return Suite{
		Name:     "delta",
		Doc:      "D1-D4: deltafs delta codecs beside xdelta3 -9 and zstd -19 --patch-from",
		Run:      runDeltaSuite,
		Children: map[string]ChildFunc{"encode": childEncode, "apply": childApply},
	}
}

// deltafsCodec is one way of encoding with package delta, as measured.
type deltafsCodec struct {
	name  string
	codec deltaCodec
	// slow codecs run -slow-n times (but, unlike the slow baselines, on
	// every revision of a long chain: they take well under a second each).
	slow bool
}

func deltafsCodecs() []deltafsCodec {
	return []deltafsCodec{
		{name: "deltafs copy: Encode", codec: codecCopy},
		{name: "deltafs copy: NewIndex+Index.Encode", codec: codecIndex},
		{name: "deltafs zstd-dict L2: EncodeZstd", codec: codecZstd2, slow: true},
		{name: "deltafs zstd-dict L4: EncodeZstd", codec: codecZstd4, slow: true},
	}
}

// measured is one row of a workload's table.
type measured struct {
	name     string
	kind     rowKind
	enc, app Summary
	sampled  int   // revisions measured, out of the chain's steps
	steps    []int // which revisions
}

type rowKind uint8

const (
	rowDeltafs  rowKind = iota // a deltafs codec
	rowBaseline                // an external tool
	rowSizeOnly                // a derived or reference size, no timing
)

// total is the named size summed over the chain, scaled up from the
// sampled revisions when only some were measured.
func (m measured) total(name string, chainSteps int) int64 {
	var s int64
	for _, v := range m.enc.Sizes[name] {
		s += v
	}
	if m.sampled > 0 && m.sampled < chainSteps {
		s = s * int64(chainSteps) / int64(m.sampled)
	}
	return s
}

func runDeltaSuite(env *Env) (Report, error) {
	progs := []string{"xdelta3", "zstd"}
	missing := env.ensureTools(progs, progs)
	rep := Report{Intro: deltaIntro(env, missing)}
	var all []chainResult
	for _, c := range workload.DeltaChains() {
		r, err := env.measureChain(c, missing)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", c.Name, err)
		}
		all = append(all, r)
		rep.Tables = append(rep.Tables, r.table())
	}
	rep.Tables = append(rep.Tables, targetsTable(all))
	rep.Notes = deltaNotes(env)
	return rep, nil
}

// chainResult is everything measured on one workload.
type chainResult struct {
	chain  workload.Chain
	target int64 // bytes of all targets (revisions 1..Steps)
	rows   []measured
}

func (env *Env) measureChain(c workload.Chain, missing []string) (chainResult, error) {
	dir := filepath.Join(env.Work, c.Name)
	env.Logf("%s: generating %s", c.Name, c.Doc)
	target, err := writeChain(c, dir)
	if err != nil {
		return chainResult{}, err
	}
	r := chainResult{chain: c, target: target}
	for _, dc := range deltafsCodecs() {
		m, err := env.measureDeltafs(c, dir, dc)
		if err != nil {
			return r, fmt.Errorf("%s: %w", dc.name, err)
		}
		r.rows = append(r.rows, m)
	}
	r.rows = append(r.rows, bestOf("deltafs best of copy | zstd-dict L2", r.rows[0], r.rows[2]))
	for _, b := range deltaBaselines() {
		if contains(missing, b.program) {
			continue
		}
		m, err := env.measureBaseline(c, dir, b)
		if err != nil {
			return r, fmt.Errorf("%s: %w", b.name, err)
		}
		r.rows = append(r.rows, m)
	}
	if c.Unrelated && !contains(missing, "zstd") {
		for _, lvl := range []string{"-3", "-19"} {
			m, err := env.measureAlone(c, dir, lvl)
			if err != nil {
				return r, err
			}
			r.rows = append(r.rows, m)
		}
	}
	return r, nil
}

// writeChain writes revisions 0..Steps of c to dir and returns the bytes
// of all targets.
func writeChain(c workload.Chain, dir string) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var target int64
	err := c.Walk(func(n int, rev []byte) error {
		if n > 0 {
			target += int64(len(rev))
		}
		return os.WriteFile(revPath(dir, n), rev, 0o644)
	})
	return target, err
}

func (env *Env) measureDeltafs(c workload.Chain, dir string, dc deltafsCodec) (measured, error) {
	runs, sample := env.Opts.Runs, 0
	if dc.slow {
		runs = env.Opts.SlowRuns
	}
	ddir := filepath.Join(env.Work, c.Name+"-"+string(dc.codec))
	args := []string{"-dir", dir, "-steps", strconv.Itoa(c.Steps), "-codec", string(dc.codec),
		"-deltas", ddir, "-sample", strconv.Itoa(sample)}
	env.Logf("%s: %s, encode x%d", c.Name, dc.name, runs)
	enc, err := Repeat(runs, func() (Sample, error) { return env.Child("delta", "encode", args...) })
	if err != nil {
		return measured{}, err
	}
	env.Logf("%s: %s, apply x%d", c.Name, dc.name, runs)
	app, err := Repeat(runs, func() (Sample, error) { return env.Child("delta", "apply", args...) })
	if err != nil {
		return measured{}, err
	}
	steps := sampleSteps(c.Steps, sample, sample > 0)
	if enc.Sizes, err = storedSizes(ddir, steps); err != nil {
		return measured{}, err
	}
	return measured{name: dc.name, kind: rowDeltafs, enc: enc, app: app, sampled: len(steps), steps: steps}, nil
}

func (env *Env) measureBaseline(c workload.Chain, dir string, b baseline) (measured, error) {
	runs := env.Opts.Runs
	if b.slow {
		runs = env.Opts.SlowRuns
	}
	steps := sampleSteps(c.Steps, env.Opts.ChainSample, b.slow)
	ddir := filepath.Join(env.Work, c.Name+"-"+b.program)
	if err := os.MkdirAll(ddir, 0o755); err != nil {
		return measured{}, err
	}
	env.Logf("%s: %s on %d revision(s), encode x%d", c.Name, b.name, len(steps), runs)
	enc, err := Repeat(runs, func() (Sample, error) { return env.runBaseline(b, dir, ddir, steps, false) })
	if err != nil {
		return measured{}, err
	}
	env.Logf("%s: %s, apply x%d", c.Name, b.name, runs)
	app, err := Repeat(runs, func() (Sample, error) { return env.runBaseline(b, dir, ddir, steps, true) })
	if err != nil {
		return measured{}, err
	}
	return measured{name: b.name, kind: rowBaseline, enc: enc, app: app, sampled: len(steps), steps: steps}, nil
}

// measureAlone compresses each target with the zstd CLI at level, no base:
// the reference size for unrelated inputs.
func (env *Env) measureAlone(c workload.Chain, dir, level string) (measured, error) {
	out := filepath.Join(env.Work, c.Name+"-alone.zst")
	var sizes []int64
	for n := 1; n <= c.Steps; n++ {
		if _, err := env.Exec("zstd", "-q", "-f", level, revPath(dir, n), "-o", out); err != nil {
			return measured{}, err
		}
		fi, err := os.Stat(out)
		if err != nil {
			return measured{}, err
		}
		sizes = append(sizes, fi.Size())
	}
	sz := map[string][]int64{"raw": sizes, "stored": sizes, "best": sizes}
	return measured{name: "target alone, zstd " + level, kind: rowSizeOnly, enc: Summary{Sizes: sz}}, nil
}

// bestOf is the size a store gets by trying codecs a and b on every
// revision and keeping the smaller (both measured on the same revisions).
func bestOf(name string, a, b measured) measured {
	if a.sampled != b.sampled {
		// b was sampled: compare on b's revisions only.
		idx := map[int]int{}
		for i, n := range a.steps {
			idx[n] = i
		}
		sub := map[string][]int64{}
		for k, v := range a.enc.Sizes {
			for _, n := range b.steps {
				sub[k] = append(sub[k], v[idx[n]])
			}
		}
		a.enc.Sizes, a.sampled, a.steps = sub, b.sampled, b.steps
	}
	sz := map[string][]int64{}
	for _, k := range []string{"raw", "stored", "best"} {
		for i := range a.enc.Sizes[k] {
			sz[k] = append(sz[k], min(a.enc.Sizes[k][i], b.enc.Sizes[k][i]))
		}
	}
	return measured{name: name, kind: rowSizeOnly, enc: Summary{Sizes: sz}, sampled: a.sampled, steps: a.steps}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
