package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
)

// The git and Mercurial baselines of the store suite. Their ingest runs
// inside a bench child that generates the same revisions as the deltafs
// ingest and feeds them to the tool; the figures are the tool's own
// processes (their rusage), not the generator's.

// walkHistory calls fn with every revision of the history a describes:
// n, p1, p2 (-1 for none), the line it belongs to and its bytes.
func (a storeArgs) walkHistory(fn func(n, p1, p2 int, line byte, data []byte) error) error {
	if a.merge {
		return a.mergeSpec().Walk(func(n int, r workload.MergeRev) error {
			return fn(n, r.P1, r.P2, r.Line, r.Data)
		})
	}
	return a.chain.Walk(func(n int, rev []byte) error { return fn(n, n-1, -1, 'a', rev) })
}

// childGitImport runs git fast-import --depth=2000 on a fast-import stream
// of the history, one commit per revision (marks :1.. are revisions 0..),
// and reports git's wall, CPU and peak RSS ("rss_floor": what a program
// that does nothing reports when started the same way).
func childGitImport(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseStoreArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	if out, err := exec.CommandContext(ctx, "git", "init", "-q", "--bare", a.dir).CombinedOutput(); err != nil {
		return ChildResult{}, fmt.Errorf("git init: %w: %s", err, out)
	}
	cmd := exec.CommandContext(ctx, "git", "-C", a.dir, "fast-import", "--quiet", "--depth=2000",
		"--export-marks="+filepath.Join(a.dir, "bench-marks"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return ChildResult{}, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return ChildResult{}, err
	}
	var total int64
	w := bufio.NewWriterSize(stdin, 1<<20)
	genErr := a.walkHistory(func(n, p1, p2 int, line byte, data []byte) error {
		total += int64(len(data))
		return writeCommit(w, n, p1, p2, line, data)
	})
	if genErr == nil {
		genErr = w.Flush()
	}
	stdin.Close()
	err = cmd.Wait()
	wall := time.Since(start)
	if err = errors.Join(genErr, err); err != nil {
		return ChildResult{}, fmt.Errorf("git fast-import: %w: %s", err, firstLine(stderr.String()))
	}
	s := processSample(cmd.ProcessState, wall)
	return ChildResult{WallNS: int64(s.Wall), CPUNS: int64(s.CPU), PeakRSS: s.MaxRSS, Bytes: total,
		Sizes: map[string][]int64{"rss_floor": {childRSSFloor(ctx)}}}, nil
}

// writeCommit writes revision n as one fast-import commit on branch line.
func writeCommit(w io.Writer, n, p1, p2 int, line byte, data []byte) error {
	fmt.Fprintf(w, "commit refs/heads/%c\nmark :%d\ncommitter bench <bench@localhost> %d +0000\ndata 0\n",
		line, n+1, 1_700_000_000+n)
	if p1 >= 0 {
		fmt.Fprintf(w, "from :%d\n", p1+1)
	}
	if p2 >= 0 {
		fmt.Fprintf(w, "merge :%d\n", p2+1)
	}
	fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n", storeFile, len(data))
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// childHgIngest commits every revision with hg, one `hg commit` per
// revision (after `hg debugsetparents` when the parents are not simply
// the previous commit), and reports the hg processes' total wall and CPU
// and their largest peak RSS.
func childHgIngest(ctx context.Context, args []string) (ChildResult, error) {
	a, err := parseStoreArgs(args)
	if err != nil {
		return ChildResult{}, err
	}
	var sum Sample
	hg := func(args ...string) error {
		s, err := runHg(ctx, a.dir, args...)
		sum.Wall, sum.CPU, sum.MaxRSS = sum.Wall+s.Wall, sum.CPU+s.CPU, max(sum.MaxRSS, s.MaxRSS)
		return err
	}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return ChildResult{}, err
	}
	if err := hg("init"); err != nil {
		return ChildResult{}, err
	}
	var total int64
	err = a.walkHistory(func(n, p1, p2 int, _ byte, data []byte) error {
		total += int64(len(data))
		if (p2 >= 0 || p1 != n-1) && n > 0 {
			parents := []string{"debugsetparents", strconv.Itoa(p1)}
			if p2 >= 0 {
				parents = append(parents, strconv.Itoa(p2))
			}
			if err := hg(parents...); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(a.dir, storeFile), data, 0o644); err != nil {
			return err
		}
		return hg("commit", "-A", "-q", "-m", "r"+strconv.Itoa(n), "-d", strconv.Itoa(1_700_000_000+n)+" 0")
	})
	if err != nil {
		return ChildResult{}, err
	}
	return ChildResult{WallNS: int64(sum.Wall), CPUNS: int64(sum.CPU), PeakRSS: sum.MaxRSS, Bytes: total,
		Sizes: map[string][]int64{"rss_floor": {childRSSFloor(ctx)}}}, nil
}

// runHg runs one hg command in repo with no user or system configuration.
func runHg(ctx context.Context, repo string, args ...string) (Sample, error) {
	argv := append([]string{"-R", repo, "--config", "ui.username=bench"}, args...)
	if len(args) == 1 && args[0] == "init" {
		argv = []string{"init", repo} // -R names an existing repository
	}
	cmd := exec.CommandContext(ctx, "hg", argv...)
	cmd.Env = hgEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return Sample{}, fmt.Errorf("hg %s: %w: %s", strings.Join(args, " "), err, firstLine(stderr.String()))
	}
	return processSample(cmd.ProcessState, time.Since(start)), nil
}

// hgEnv is the environment hg runs in: no hgrc but the repository's own,
// plain output.
func hgEnv() []string {
	return append(os.Environ(), "HGRCPATH=", "HGPLAIN=1")
}

// childRSSFloor is the peak RSS reported for /bin/true started from this
// child as it started the tool: the share of the tool's figure that is the
// starting process's, not the tool's.
func childRSSFloor(ctx context.Context) int64 {
	cmd := exec.CommandContext(ctx, "true")
	if err := cmd.Run(); err != nil {
		return 0
	}
	return processSample(cmd.ProcessState, 0).MaxRSS
}
