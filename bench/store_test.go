package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/bench/workload"
)

// TestStoreChildren runs the store suite's deltafs children on a small
// chain in child processes, as the runner does, and checks what they
// report against the workload.
func TestStoreChildren(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	c := workload.Chain{Seed: 9, BaseSize: 64 << 10, Steps: 30, Edits: workload.EditSpec{Count: 5}}
	dir := filepath.Join(env.Work, "s")
	ing, err := env.Child("store", "ingest", append([]string{"-dir", dir}, chainFlags(c)...)...)
	if err != nil {
		t.Fatal(err)
	}
	stored, logical := ing.Result.Sizes["stored"][0], ing.Result.Bytes
	if logical < 31*60<<10 || stored <= 0 || stored > logical/10 {
		t.Fatalf("ingest: %d logical, %d stored bytes", logical, stored)
	}
	if disk, apparent, err := dirBytes(dir); err != nil || disk <= 0 || apparent < stored {
		t.Fatalf("dirBytes: %d disk, %d apparent (stored %d), %v", disk, apparent, stored, err)
	}
	rd, err := env.Child("store", "read", "-dir", dir, "-rev", "30")
	if err != nil {
		t.Fatal(err)
	}
	if rd.Result.Bytes < 60<<10 || rd.Result.Sizes["get_ns"][0] <= 0 {
		t.Fatalf("read: %+v", rd.Result)
	}
	all, err := env.Child("store", "readall", "-dir", dir, "-cache", "1")
	if err != nil {
		t.Fatal(err)
	}
	read, size := all.Result.Sizes["read"], all.Result.Sizes["size"]
	if len(read) != 31 || len(all.Result.Sizes["lat_ns"]) != 31 {
		t.Fatalf("readall: %d revisions, want 31", len(read))
	}
	for i := range read {
		// With the cache off every read rebuilds: it reads something,
		// and never more than the caps allow.
		if read[i] <= 0 || read[i] > readCapBytes(size[i]) {
			t.Fatalf("rev %d: read %d bytes of a %d-byte text", i, read[i], size[i])
		}
	}
}

// TestMergeIngestP1Only checks that the merge history reaches the store
// with both parents: best-of-parents must store less than p1-only.
func TestMergeIngestP1Only(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	m := workload.StoreS2()
	m.Size, m.Revisions = 32<<10, 40
	var sizes [2]int64
	for i, extra := range [][]string{nil, {"-p1only"}} {
		dir := filepath.Join(env.Work, "m", extra2name(extra))
		s, err := env.Child("store", "ingest", append(append([]string{"-dir", dir}, mergeFlags(m)...), extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		sizes[i] = s.Result.Sizes["stored"][0]
	}
	if sizes[0] >= sizes[1] {
		t.Fatalf("best of parents stored %d bytes, p1-only %d", sizes[0], sizes[1])
	}
}

func extra2name(extra []string) string {
	if len(extra) == 0 {
		return "best"
	}
	return "p1"
}

// TestVCSIngest feeds a small merge history to git fast-import and hg
// (when installed) and checks the repositories hold every revision.
func TestVCSIngest(t *testing.T) {
	t.Parallel()
	if len(lookMissing([]string{"git", "hg"})) > 0 {
		t.Skip("git or hg not installed")
	}
	env := testEnv(t)
	m := workload.StoreS2()
	m.Size, m.Revisions = 8<<10, 6
	repo := filepath.Join(env.Work, "git")
	if _, err := env.Child("store", "gitimport", append([]string{"-dir", repo}, mergeFlags(m)...)...); err != nil {
		t.Fatal(err)
	}
	marks, err := readMarks(filepath.Join(repo, "bench-marks"))
	if err != nil || len(marks) != m.Revisions {
		t.Fatalf("git: %d marks, want %d (%v)", len(marks), m.Revisions, err)
	}
	var row ingestRow
	if err := gitSizes(repo, &row); err != nil || row.disk <= 0 {
		t.Fatalf("gitSizes: %+v, %v", row, err)
	}
	hg := filepath.Join(env.Work, "hg")
	s, err := env.Child("store", "hgingest", append([]string{"-dir", hg}, mergeFlags(m)...)...)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU <= 0 {
		t.Fatalf("hg: no CPU in %+v", s)
	}
	out, err := runHgOutput(hg, "log", "-T", "{rev}:{p2rev} ")
	if err != nil {
		t.Fatal(err)
	}
	var merges int
	_ = m.Walk(func(_ int, r workload.MergeRev) error {
		if r.P2 >= 0 {
			merges++
		}
		return nil
	})
	if n := countMerges(out); n != merges || merges == 0 {
		t.Fatalf("hg log %q: %d merges, want %d", out, n, merges)
	}
	if _, err := os.Stat(filepath.Join(hg, ".hg", "store", "data", storeFile+".i")); err != nil {
		t.Fatal(err)
	}
}

func runHgOutput(repo string, args ...string) (string, error) {
	cmd := exec.Command("hg", append([]string{"-R", repo}, args...)...)
	cmd.Env = hgEnv()
	out, err := cmd.Output()
	return string(out), err
}

// countMerges counts "rev:p2rev" pairs with a second parent.
func countMerges(log string) int {
	n := 0
	for _, f := range strings.Fields(log) {
		if !strings.HasSuffix(f, ":-1") {
			n++
		}
	}
	return n
}

// TestHistoryStream checks that the stream the ingest child reads carries
// the history exactly: every revision's parents and bytes, in order, for
// a chain and for the merge history.
func TestHistoryStream(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-dir", "x", "-seed", "5", "-size", "20000", "-steps", "12"},
		{"-dir", "x", "-merge", "-seed", "6", "-size", "20000", "-steps", "40"},
	} {
		a, err := parseStoreArgs(args)
		if err != nil {
			t.Fatal(err)
		}
		var want []streamRev
		_ = a.walkHistory(func(_, p1, p2 int, _ byte, data []byte) error {
			want = append(want, streamRev{p1: p1, p2: p2, data: bytes.Clone(data)})
			return nil
		})
		var buf bytes.Buffer
		if err := writeHistory(args, &buf); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			got, err := readStreamRev(&buf)
			if err != nil || got.p1 != w.p1 || got.p2 != w.p2 || !bytes.Equal(got.data, w.data) {
				t.Fatalf("%v rev %d: got parents %d,%d (%d bytes), want %d,%d (%d bytes): %v",
					args, i, got.p1, got.p2, len(got.data), w.p1, w.p2, len(w.data), err)
			}
		}
		if _, err := readStreamRev(&buf); !errors.Is(err, io.EOF) {
			t.Fatalf("%v: after the last revision: %v, want EOF", args, err)
		}
	}
	torn := []byte{1, 2, 3}
	if _, err := readStreamRev(bytes.NewReader(torn)); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("torn header: %v, want an error other than EOF", err)
	}
}
