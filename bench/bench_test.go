package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
)

// TestMain lets the test binary serve as its own child process, as the
// bench binary does, so that Env.Child and Env.Exec run for real.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == childCmd || os.Args[1] == historyCmd) {
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestTableMarkdown(t *testing.T) {
	tb := Table{Title: "T", Header: []string{"tool", "bytes"}}
	tb.Add("xdelta3", "507")
	tb.Add("a longer name", "-")
	var b bytes.Buffer
	tb.Markdown(&b)
	want := "### T\n\n" +
		"| tool          | bytes |\n" +
		"| ------------- | ----- |\n" +
		"| xdelta3       |   507 |\n" +
		"| a longer name | -     |\n\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestRepeatMedians(t *testing.T) {
	walls := []time.Duration{5, 1, 3, 4, 2}
	i := 0
	s, err := Repeat(len(walls), func() (Sample, error) {
		w := walls[i]
		i++
		return Sample{Wall: w, CPU: 10 * w, MaxRSS: int64(w), Result: ChildResult{Bytes: 7}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Wall != 3 || s.CPU != 30 || s.MaxRSS != 3 || s.Bytes != 7 || s.Runs != 5 {
		t.Fatalf("summary %+v, want medians 3/30/3 of 5 runs", s)
	}
}

func TestSampleSteps(t *testing.T) {
	if got := sampleSteps(100, 10, true); len(got) != 10 || got[0] != 10 || got[9] != 100 {
		t.Fatalf("sampleSteps(100, 10) = %v", got)
	}
	if got := sampleSteps(100, 10, false); len(got) != 100 || got[0] != 1 {
		t.Fatalf("not slow: %d steps from %d, want all 100", len(got), got[0])
	}
	if got := sampleSteps(1, 10, true); len(got) != 1 || got[0] != 1 {
		t.Fatalf("sampleSteps(1, 10) = %v", got)
	}
	if w := windowLog(16<<20, 16<<20); w != 26 {
		t.Fatalf("windowLog(16 MiB, 16 MiB) = %d, want 26", w)
	}
}

// testEnv is an Env whose children are this test binary.
func testEnv(t *testing.T) *Env {
	t.Helper()
	o := Options{Runs: 1, SlowRuns: 1, ChainSample: 2, OutDir: t.TempDir(), WorkDir: t.TempDir(), NoInstall: true}
	var log bytes.Buffer
	env, err := newEnv(context.Background(), o, "delta", &bytes.Buffer{}, &log)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestExecMeasuresProcess(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	s, err := env.Exec("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU <= 0 || s.Wall <= 0 || s.MaxRSS <= 0 {
		t.Fatalf("sample %+v, want CPU, wall and RSS", s)
	}
	if _, err := env.Exec("false"); err == nil {
		t.Fatal("a failing program gave no error")
	}
}

// TestDeltaChildren runs the deltafs encode and apply children on a small
// chain, in child processes as the runner does; apply checks every output
// against the revision files.
func TestDeltaChildren(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	c := workload.Chain{Name: "T", Seed: 5, BaseSize: 64 << 10, Steps: 2,
		Edits: workload.EditSpec{Count: 3, MinLen: 10, MaxLen: 500}}
	dir := filepath.Join(env.Work, "T")
	target, err := writeChain(c, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Two codecs, one of each family: every child costs about a second
	// under -race.
	for _, dc := range deltafsCodecs()[1:3] {
		m, err := env.measureDeltafs(c, dir, dc)
		if err != nil {
			t.Fatalf("%s: %v", dc.name, err)
		}
		if m.enc.Bytes != target || m.app.Bytes != target {
			t.Fatalf("%s: measured %d/%d target bytes, want %d", dc.name, m.enc.Bytes, m.app.Bytes, target)
		}
		stored := m.total("stored", c.Steps)
		if stored <= 0 || stored > target/10 {
			t.Fatalf("%s: %d stored bytes for small edits of %d bytes", dc.name, stored, target)
		}
		if m.enc.MaxRSS <= 0 || m.enc.CPU <= 0 {
			t.Fatalf("%s: no CPU or RSS in %+v", dc.name, m.enc)
		}
	}
}

func TestUnknownSuite(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"nosuch"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "unknown suite") {
		t.Fatalf("err = %v, want unknown suite", err)
	}
}

// TestREADMENamesEverySuite: the README's Benchmarks section gives the
// command of every suite (it missed history and gc).
func TestREADMENamesEverySuite(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"all"}
	for _, s := range suites() {
		names = append(names, s.Name)
	}
	for _, name := range names {
		if !strings.Contains(string(readme), "\ngo run ./bench "+name+" ") {
			t.Errorf("README.md has no line %q", "go run ./bench "+name)
		}
	}
}
