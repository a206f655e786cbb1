package main

import (
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
)

// baseline is an external delta tool run on the same files as deltafs.
type baseline struct {
	name    string // as shown in the report
	program string
	// slow baselines run -slow-n times, and on long chains only on
	// -chain-sample evenly spaced revisions.
	slow   bool
	encode func(base, target, out string, wlog int) []string
	apply  func(base, delta, out string, wlog int) []string
}

func deltaBaselines() []baseline {
	return []baseline{
		{
			name: "xdelta3 -9", program: "xdelta3",
			encode: func(base, target, out string, _ int) []string {
				return []string{"-9", "-e", "-f", "-s", base, target, out}
			},
			apply: func(base, d, out string, _ int) []string {
				return []string{"-d", "-f", "-s", base, d, out}
			},
		},
		{
			name: "zstd -19 --patch-from", program: "zstd", slow: true,
			encode: func(base, target, out string, wlog int) []string {
				return []string{"-q", "-f", "-19", longFlag(wlog), "--patch-from=" + base, target, "-o", out}
			},
			apply: func(base, d, out string, wlog int) []string {
				return []string{"-q", "-f", "-d", longFlag(wlog), "--patch-from=" + base, d, "-o", out}
			},
		},
	}
}

func longFlag(wlog int) string { return fmt.Sprintf("--long=%d", wlog) }

// windowLog is the zstd window (log2) that lets a --patch-from match reach
// from the end of the target back to the start of the base: the two sizes
// together, rounded up to a power of two, within zstd's limits.
func windowLog(baseLen, targetLen int64) int {
	return min(max(bits.Len64(uint64(baseLen+targetLen)), 10), 30)
}

// sampleSteps returns the revisions a baseline encodes: every one, or for
// a slow baseline on a long chain, sample of them evenly spaced.
func sampleSteps(steps, sample int, slow bool) []int {
	if !slow || steps <= sample {
		sample = steps
	}
	out := make([]int, sample)
	for k := range out {
		out[k] = (k + 1) * steps / sample
	}
	return out
}

// runBaseline encodes (or applies) the chosen revisions of a chain with
// b, one process per revision, and returns their sum as one Sample. Sizes
// are the delta files' sizes; apply checks every output.
func (e *Env) runBaseline(b baseline, dir, ddir string, steps []int, apply bool) (Sample, error) {
	var sum Sample
	sizes := make([]int64, 0, len(steps))
	out := filepath.Join(ddir, "out")
	for _, n := range steps {
		base, target, d := revPath(dir, n-1), revPath(dir, n), deltaPath(ddir, n)
		bi, err := os.Stat(base)
		if err != nil {
			return sum, err
		}
		ti, err := os.Stat(target)
		if err != nil {
			return sum, err
		}
		wlog := windowLog(bi.Size(), ti.Size())
		var s Sample
		if apply {
			s, err = e.Exec(b.program, b.apply(base, d, out, wlog)...)
		} else {
			s, err = e.Exec(b.program, b.encode(base, target, d, wlog)...)
		}
		if err != nil {
			return sum, err
		}
		if apply {
			if err := sameFiles(out, target); err != nil {
				return sum, fmt.Errorf("%s: %w", b.name, err)
			}
		} else if di, err := os.Stat(d); err == nil {
			sizes = append(sizes, di.Size())
		} else {
			return sum, err
		}
		sum.Wall += s.Wall
		sum.CPU += s.CPU
		sum.MaxRSS = max(sum.MaxRSS, s.MaxRSS)
		sum.Result.Bytes += ti.Size()
	}
	if !apply {
		sum.Result.Sizes = map[string][]int64{"raw": sizes, "stored": sizes, "best": sizes}
	}
	return sum, nil
}

// sameFiles checks that the files at a and b hold the same bytes.
func sameFiles(a, b string) error {
	data, err := os.ReadFile(a)
	if err != nil {
		return err
	}
	return sameAsFile(b, data)
}
