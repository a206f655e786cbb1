package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// makeStore writes files x revs revisions of deterministic text, each a
// small edit of the one before, and returns the store's directory.
func makeStore(t *testing.T, files, revs int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := objstore.Open(dir, objstore.Config{Create: true, P1Only: true, MaxChainLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for f := range files {
		id, err := s.NewFile(fmt.Sprintf("dir/file%d.txt", f))
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for i := range 400 {
			lines = append(lines, fmt.Sprintf("line %d of file %d: some text to compress", i, f))
		}
		var prev index.RevID
		for r := range revs {
			lines[(r*37)%len(lines)] = fmt.Sprintf("edited in revision %d", r)
			e, err := s.Put(ctx, objstore.PutRequest{File: id, Data: []byte(strings.Join(lines, "\n")), P1: prev})
			if err != nil {
				t.Fatal(err)
			}
			prev = e.ID()
		}
	}
	return dir
}

func TestRepackCommand(t *testing.T) {
	dir := makeStore(t, 2, 20)
	r := runCLI(t, nil, "repack", "--window", "4", dir)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"repacked " + dir + ": 40 revisions of 2 files", "re-deltaed", "reused verbatim", "chains", "window 4"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, nil, "repack", "--json", "--reuse=never", "--jobs", "1", "--memory-limit", "64MiB", dir)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"store", "files", "revisions", "size_before", "size_after", "stored_before", "stored_after",
		"redeltaed", "reused", "unchanged", "resumed", "chain_max_before", "chain_max_after", "chain_mean_before",
		"chain_mean_after", "duration_ns", "peak_rss", "window", "jobs"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	if rep["reused"] != 0.0 || rep["revisions"] != 40.0 || rep["store"] != dir || rep["jobs"] != 1.0 {
		t.Errorf("JSON report: %v", rep)
	}
	if v := runCLI(t, nil, "verify", dir); v.code != exitOK {
		t.Fatalf("verify after repack: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}

func TestRepackCommandErrors(t *testing.T) {
	dir := makeStore(t, 1, 3)
	s, err := objstore.Open(dir, objstore.Config{Holder: "/mnt/work"})
	if err != nil {
		t.Fatal(err)
	}
	locked := runCLI(t, nil, "repack", dir)
	s.Close()
	// as README shows it: no package name between the command and the store
	requireOneErrorLine(t, locked, exitStoreLocked, fmt.Sprintf("deltafs: repack: store %s is locked by pid %d (/mnt/work)\n", dir, os.Getpid()))
	empty := t.TempDir()
	requireOneErrorLine(t, runCLI(t, nil, "repack", empty), exitNotStore, "deltafs: repack: "+empty+": not a deltafs store (no FORMAT file)\n")
	requireOneErrorLine(t, runCLI(t, nil, "repack", filepath.Join(t.TempDir(), "nosuch")), exitNotStore, "not a deltafs store")
	usage := map[string][]string{
		`reuse "sometimes"`:      {"repack", "--reuse=sometimes", dir},
		`bad size "lots"`:        {"repack", "--memory-limit", "lots", dir},
		"must be positive":       {"repack", "--window", "0", dir},
		"expects 1 argument,":    {"repack"},
		"unknown flag: --nosuch": {"repack", "--nosuch", dir},
	}
	for want, args := range usage {
		requireOneErrorLine(t, runCLI(t, nil, args...), exitUsage, want)
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{"0": 0, "123": 123, "1k": 1024, "512M": 512 << 20, "2GiB": 2 << 30, "1.5g": 3 << 29, "3KB": 3072, "1T": 1 << 40}
	for in, want := range good {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1q", "1e30"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine("repack", 50, 100, 25<<20, 100<<20, 10*time.Second)
	for _, want := range []string{"repack [######------------------] 50/100 revisions", "25.0 MiB/100.0 MiB", "2.5 MiB/s", "ETA 30s"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress line %q lacks %q", got, want)
		}
	}
	if got := progressLine("verify", 10, 10, 0, 0, time.Second); strings.Contains(got, "ETA") || !strings.Contains(got, "10/10") {
		t.Errorf("finished line %q", got)
	}
}

// TestProgressBarOnlyOnTerminal: a pipe gets no bar; a terminal gets
// redraws that start by erasing the line, and a final erase.
func TestProgressBarOnlyOnTerminal(t *testing.T) {
	var buf bytes.Buffer
	if newProgressBar(&buf, "x") != nil {
		t.Fatal("a bar on a buffer")
	}
	var nilBar *progressBar
	nilBar.update(1, 2, 0, 0) // a nil bar draws nothing and does not panic
	nilBar.finish()
	tty, closeTTY := openTTY(t)
	defer closeTTY()
	bar := newProgressBar(tty, "repack")
	if bar == nil {
		t.Fatal("no bar on a terminal")
	}
	bar.update(1, 100, 0, 0)
	bar.update(2, 100, 0, 0) // within redrawEvery: skipped
	if !bar.drawn {
		t.Fatal("first update did not draw")
	}
	bar.finish()
	if bar.drawn {
		t.Fatal("finish left the bar drawn")
	}
}
