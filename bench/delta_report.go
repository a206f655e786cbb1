package main

import (
	"fmt"
	"strings"
	"time"
)

// Names of the reference rows, used by the ratio columns and targets.
const (
	refXdelta = "xdelta3 -9"
	refZstd   = "zstd -19 --patch-from"
	refBest   = "deltafs best of copy | zstd-dict L2"
	refAlone  = "target alone, zstd -3"
)

func (r chainResult) row(name string) (measured, bool) {
	for _, m := range r.rows {
		if m.name == name {
			return m, true
		}
	}
	return measured{}, false
}

func (r chainResult) stored(name string) (int64, bool) {
	m, ok := r.row(name)
	if !ok {
		return 0, false
	}
	return m.total("stored", r.chain.Steps), true
}

func (r chainResult) table() Table {
	c := r.chain
	t := Table{
		Title: fmt.Sprintf("%s: %s", c.Name, c.Doc),
		Doc: fmt.Sprintf("%d target bytes over %d revision(s). Sizes are totals over the chain "+
			"(~ marks a total scaled up from the sampled revisions); times are per revision.",
			r.target, c.Steps),
		Header: []string{"tool", "revs", "delta B", "stored B", "stored B (zstd best)",
			"/ xdelta3", "/ zstd", "enc MB/s", "enc CPU ms", "enc wall ms", "enc RSS MiB",
			"apply MB/s", "apply CPU ms", "apply RSS MiB"},
	}
	xd, hasXd := r.stored(refXdelta)
	zs, hasZs := r.stored(refZstd)
	for _, m := range r.rows {
		st := m.total("stored", c.Steps)
		cells := []string{m.name, revsCell(m, c.Steps),
			sizeCell(m, "raw", c.Steps), sizeCell(m, "stored", c.Steps), sizeCell(m, "best", c.Steps),
			ratioCell(st, xd, hasXd), ratioCell(st, zs, hasZs)}
		if m.kind == rowSizeOnly {
			cells = append(cells, "-", "-", "-", "-", "-", "-", "-")
		} else {
			cells = append(cells, timeCells(m.enc, m.sampled)...)
			cells = append(cells, timeCells(m.app, m.sampled)[0], perRev(m.app.CPU, m.sampled), mib(m.app.MaxRSS))
		}
		t.Add(cells...)
	}
	return t
}

func revsCell(m measured, steps int) string {
	if m.sampled == 0 || m.sampled == steps {
		return fmt.Sprint(steps)
	}
	return fmt.Sprintf("%d of %d", m.sampled, steps)
}

func sizeCell(m measured, name string, steps int) string {
	v := m.total(name, steps)
	if m.sampled > 0 && m.sampled < steps {
		return fmt.Sprintf("~%d", v)
	}
	return fmt.Sprint(v)
}

func ratioCell(v, ref int64, ok bool) string {
	if !ok || ref == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(v)/float64(ref))
}

// timeCells: throughput over CPU time, CPU and wall per revision, peak RSS.
func timeCells(s Summary, revs int) []string {
	return []string{fmt.Sprintf("%.0f", MBps(s.Bytes, s.CPU)), perRev(s.CPU, revs), perRev(s.Wall, revs), mib(s.MaxRSS)}
}

func perRev(d time.Duration, revs int) string {
	return fmt.Sprintf("%.1f", d.Seconds()*1e3/float64(max(revs, 1)))
}

func mib(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

// targetsTable checks the targets of issue 2 against the measured figures.
func targetsTable(all []chainResult) Table {
	t := Table{
		Title:  "Targets (issue 2)",
		Doc:    "Encode uses the faster deltafs copy variant, apply the slower of the two variants' deltas; sizes use the best of copy | zstd-dict L2 per revision, as the store keeps it.",
		Header: []string{"target", "workload", "measured", "goal", "met"},
	}
	for _, r := range all {
		name := r.chain.Name
		if name == "D1" || name == "D4" {
			enc, encBy := copyRate(r, func(m measured) Summary { return m.enc }, true)
			app, appBy := copyRate(r, func(m measured) Summary { return m.app }, false)
			t.Add("encode, one core", name, fmt.Sprintf("%.0f MB/s (%s)", enc, encBy), ">= 1000 MB/s", yes(enc >= 1000))
			t.Add("apply, one core", name, fmt.Sprintf("%.0f MB/s (%s)", app, appBy), ">= 2000 MB/s", yes(app >= 2000))
		}
		best, ok := r.stored(refBest)
		if !ok {
			continue
		}
		if r.chain.Unrelated {
			if alone, ok := r.stored(refAlone); ok {
				t.Add("size vs target alone (zstd -3)", name, fmt.Sprintf("%d B / %d B = %.2f", best, alone, ratio(best, alone)), "<= 1.00", yes(best <= alone))
			}
			continue
		}
		for _, ref := range []string{refXdelta, refZstd} {
			if v, ok := r.stored(ref); ok {
				t.Add("size vs "+ref, name, fmt.Sprintf("%d B / %d B = %.2f", best, v, ratio(best, v)), "<= 1.20", yes(ratio(best, v) <= 1.2))
			}
		}
	}
	return t
}

// copyRate returns the highest (or lowest) MB/s of the deltafs copy rows
// and that row's name.
func copyRate(r chainResult, pick func(measured) Summary, highest bool) (float64, string) {
	best, by := -1.0, ""
	for _, m := range r.rows {
		if m.kind != rowDeltafs || !strings.Contains(m.name, "copy") {
			continue
		}
		s := pick(m)
		if v := MBps(s.Bytes, s.CPU); best < 0 || (v > best) == highest {
			best, by = v, strings.TrimPrefix(m.name, "deltafs copy: ")
		}
	}
	return best, by
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func deltaIntro(env *Env, missing []string) []string {
	intro := []string{fmt.Sprintf("Medians of %d runs (%d for the slow codecs: deltafs zstd-dict and zstd -19; "+
		"zstd -19, at ~10 s per 16 MiB revision, encodes only %d evenly spaced revisions of D4, each against "+
		"its predecessor, and its D4 totals are scaled to the chain).",
		env.Opts.Runs, env.Opts.SlowRuns, env.Opts.ChainSample)}
	var tools []string
	for _, b := range deltaBaselines() {
		if contains(missing, b.program) {
			tools = append(tools, b.program+": MISSING, skipped")
			continue
		}
		args := "--version"
		if b.program == "xdelta3" {
			args = "-V"
		}
		tools = append(tools, fmt.Sprintf("%s: %s", b.program, toolVersion(b.program, args)))
	}
	return append(intro, "Baselines: "+strings.Join(tools, "; ")+".")
}

func deltaNotes(env *Env) []string {
	return []string{
		"MB/s is target bytes per CPU second (10^6 B), one core: deltafs runs in a child process with GOMAXPROCS=1 and times only the call (inputs already in memory); xdelta3 and zstd are whole processes (user+sys), including reading their inputs from the page cache.",
		"stored B is what the store keeps, by objstore's policy: a copy/insert delta compressed with klauspost zstd without the frame CRC, at SpeedBestCompression up to 64 KiB and SpeedDefault above, if that is smaller (the next column: every delta at SpeedBestCompression); zstd-dict deltas are stored as they are, and baselines' deltas count as they are.",
		"apply replays the chain: revision n from the rebuilt revision n-1 and delta n, with delta.AppendApply into one of two reused, pre-faulted buffers (a first touch of fresh memory costs about as much as the whole apply here); every output is compared with the generated revision. Baselines apply each delta to the base file in a fresh process.",
		fmt.Sprintf("RSS is the peak resident set: for deltafs the child's VmHWM, which holds base, target and output besides the codec's own memory; for baselines the tool's ru_maxrss, which includes a floor of %s MiB from the exec wrapper (measured running /bin/true).", mib(env.RSSFloor())),
		"zstd runs with --long=W (W = bits of base+target size, so matches reach the whole base) for encode and decode.",
	}
}
