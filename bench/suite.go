package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Suite is one family of benchmarks: it generates its workloads, runs
// deltafs and its baselines on them through the Env, and returns the
// tables of its report.
type Suite struct {
	Name string
	Doc  string
	Run  func(env *Env) (Report, error)
	// Children are the operations this suite runs in a fresh child process,
	// by name (see Env.Child).
	Children map[string]ChildFunc
}

// Report is what a suite hands back: an introduction, tables, and notes
// printed after the tables.
type Report struct {
	Intro  []string
	Tables []Table
	Notes  []string
}

// Options are the runner's flags.
type Options struct {
	Runs        int
	SlowRuns    int
	VCSRuns     int
	ChainSample int
	OutDir      string
	WorkDir     string
	NoInstall   bool
	DeltafsSrc  string // the checkout deltafs is built from ("": this one)
	// Only, if set, limits a suite to the comma-separated benchmark ids
	// (e.g. "M1,M3").
	Only string
}

// selected reports whether benchmark id is to run.
func (o Options) selected(id string) bool {
	if o.Only == "" {
		return true
	}
	for _, x := range strings.Split(o.Only, ",") {
		if strings.TrimSpace(x) == id {
			return true
		}
	}
	return false
}

// Env is what a suite measures with: options, a work directory for its
// generated files, the path of the bench binary itself for child
// processes, and a log for progress lines.
type Env struct {
	ctx     context.Context
	Opts    Options
	Work    string
	self    string
	command string
	out     io.Writer
	log     io.Writer
	cleanup bool
}

func newEnv(ctx context.Context, o Options, suite string, stdout, stderr io.Writer) (*Env, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	e := &Env{ctx: ctx, Opts: o, self: self, out: stdout, log: stderr, Work: o.WorkDir}
	e.command = "go run ./bench " + suite + commandFlags(os.Args[2:])
	if e.Work == "" {
		if e.Work, err = os.MkdirTemp("", "deltafs-bench-"); err != nil {
			return nil, fmt.Errorf("work directory: %w", err)
		}
		e.cleanup = true
	} else if err := os.MkdirAll(e.Work, 0o755); err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	}
	return e, nil
}

// commandFlags renders the flags the runner was given, for the report.
func commandFlags(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return " " + strings.Join(args, " ")
}

// Close removes the work directory if the Env created it.
func (e *Env) Close() {
	if e.cleanup {
		os.RemoveAll(e.Work)
	}
}

// Context is cancelled on SIGINT/SIGTERM.
func (e *Env) Context() context.Context { return e.ctx }

// Logf prints a progress line on stderr.
func (e *Env) Logf(format string, args ...any) {
	fmt.Fprintf(e.log, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// runSuite runs s, prints its report and writes it to OutDir/NAME.md.
func (e *Env) runSuite(s Suite) error {
	e.Logf("suite %s: %s", s.Name, s.Doc)
	start := time.Now()
	rep, err := s.Run(e)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# bench: %s\n\n", s.Name)
	fmt.Fprintf(&b, "Command: `%s` (%s, took %s)\n\n", e.command,
		time.Now().UTC().Format("2006-01-02 15:04 MST"), time.Since(start).Round(time.Second))
	writeMachine(&b)
	writeSource(&b, e.Opts.DeltafsSrc)
	for _, p := range rep.Intro {
		fmt.Fprintf(&b, "%s\n\n", p)
	}
	for _, t := range rep.Tables {
		t.Markdown(&b)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if _, err := io.WriteString(e.out, b.String()); err != nil {
		return err
	}
	if err := os.MkdirAll(e.Opts.OutDir, 0o755); err != nil {
		return fmt.Errorf("report directory: %w", err)
	}
	path := filepath.Join(e.Opts.OutDir, s.Name+".md")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	e.Logf("wrote %s", path)
	return nil
}
