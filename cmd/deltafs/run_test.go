package main

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/deltafs/deltafs/mount"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// result is what one in-process run of deltafs produced.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs deltafs in-process with stdin and returns what it did.
func runCLI(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errOut bytes.Buffer
	code := run(args, stdin, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// requireOneErrorLine checks that r failed with code and exactly one
// stderr line starting "deltafs: " and containing want, and wrote nothing
// to stdout.
func requireOneErrorLine(t *testing.T, r result, code int, want string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr is not exactly one line: %q", r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "deltafs: ") || !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q: want prefix %q and %q in it", r.stderr, "deltafs: ", want)
	}
	if r.stdout != "" {
		t.Errorf("stdout not empty on error: %d bytes", len(r.stdout))
	}
}

// allCommands returns the command path (without "deltafs") of every
// command in the tree, the root as an empty path.
func allCommands() [][]string {
	root := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(root, nil)
	return paths
}

func TestHelpEveryCommand(t *testing.T) {
	paths := allCommands()
	if len(paths) < 8 { // root, version, delta, encode, apply, help, completion + shells
		t.Fatalf("only %d commands found: %v", len(paths), paths)
	}
	for _, path := range paths {
		t.Run(strings.Join(append([]string{"deltafs"}, path...), " "), func(t *testing.T) {
			r := runCLI(t, nil, append(path, "--help")...)
			if r.code != exitOK || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "Usage:") {
				t.Fatalf("no usage in help output:\n%s", r.stdout)
			}
		})
	}
}

func TestRootHelpDescribesDeltafs(t *testing.T) {
	r := runCLI(t, nil)
	if r.code != exitOK || !strings.Contains(r.stdout, "versioned FUSE filesystem") {
		t.Fatalf("exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := runCLI(t, nil, "completion", shell)
		if r.code != exitOK || !strings.Contains(r.stdout, "deltafs") || len(r.stdout) < 500 {
			t.Errorf("%s: exit %d, %d bytes, stderr %q", shell, r.code, len(r.stdout), r.stderr)
		}
	}
}

func TestCodecCompletion(t *testing.T) {
	r := runCLI(t, nil, "__complete", "delta", "encode", "--codec", "")
	for _, name := range codecNames {
		if !strings.Contains(r.stdout, name+"\n") {
			t.Errorf("completion of --codec lacks %q:\n%s", name, r.stdout)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `unknown command "nosuch"`},
		{[]string{"delat"}, `did you mean "delta"?`},
		{[]string{"delta", "nosuch"}, `delta: unknown command "nosuch"`},
		{[]string{"--nosuch"}, "unknown flag: --nosuch"},
		{[]string{"version", "extra"}, "version: expects 0 arguments, got 1"},
		{[]string{"delta", "encode", "onlyone"}, "delta encode: expects 2 arguments, got 1"},
		{[]string{"delta", "apply", "a", "b", "c"}, "delta apply: expects 2 arguments, got 3"},
		{[]string{"delta", "encode", "--codec", "lzma", "a", "b"}, `unknown codec "lzma"`},
		{[]string{"delta", "encode", "-", "-"}, `at most one input may be "-"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runCLI(t, nil, tt.args...)
			requireOneErrorLine(t, r, exitUsage, tt.want)
			if !strings.Contains(r.stderr, "--help') ") && !strings.HasSuffix(r.stderr, "--help')\n") {
				t.Errorf("usage error without a --help hint: %q", r.stderr)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("disk on fire"), exitFailure},
		{usageErrorf("bad flag"), exitUsage},
		{fmt.Errorf("wrapped: %w", usageErrorf("bad flag")), exitUsage},
		// a mount's control socket refusing another user (a review: exit 1)
		{fmt.Errorf("log: %w", mount.ErrDenied), exitPermission},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestHelpDefaultsAreTaken: a default the help shows ("(default X)") is
// a value its flag takes. "deltafs cat --help" showed "--rev int ...
// (default -1)" and "gc --help" "--keep-within ... (default 0s)", values
// the commands refuse ("--rev -1: not a revision number", "bad duration
// \"0s\""); the help says in words what leaving them out means.
func TestHelpDefaultsAreTaken(t *testing.T) {
	shown := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([\w-]+)(?: \S+)?\s.*\(default ([^)]*)\)$`)
	for _, path := range allCommands() {
		r := runBinary(t, nil, append(path, "--help")...)
		for _, m := range shown.FindAllStringSubmatch(r.stdout, -1) {
			flag, def := m[1], m[2]
			// Parse the default as the command line would, in a fresh tree.
			root := newRootCmd()
			cmd, _, err := root.Find(path)
			if err != nil {
				t.Fatal(err)
			}
			f := cmd.Flags().Lookup(flag)
			if f == nil {
				t.Errorf("deltafs %s --help: --%s shown but not found", strings.Join(path, " "), flag)
				continue
			}
			if err := f.Value.Set(def); err != nil {
				t.Errorf("deltafs %s --help shows --%s (default %s), which the flag refuses: %v", strings.Join(path, " "), flag, def, err)
			}
		}
	}
	for _, path := range [][]string{{"cat"}, {"restore"}} {
		r := runBinary(t, nil, append(path, "--help")...)
		if !strings.Contains(r.stdout, "--rev N ") || strings.Contains(r.stdout, "(default -1)") {
			t.Errorf("deltafs %s --help: want --rev N with no -1 default:\n%s", path[0], r.stdout)
		}
	}
}
