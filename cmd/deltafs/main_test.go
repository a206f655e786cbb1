package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// e2eVersion is linked into the test binary to check the -ldflags plumbing.
const e2eVersion = "v0.0.0-e2e"

// binary is the path of the deltafs binary that TestMain builds.
var binary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

// testMain builds the real binary into a temporary directory, runs the
// tests and removes the directory.
func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "deltafs-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "deltafs")
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+e2eVersion, "-o", binary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building deltafs: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// runBinary runs the built deltafs with stdin and returns what it did.
func runBinary(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("running %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// TestBinaryEndToEnd drives the real binary through pipes: version with
// the linked version string, an encode/apply round trip over stdin and
// stdout, and one-line errors with the right exit codes.
func TestBinaryEndToEnd(t *testing.T) {
	if r := runBinary(t, nil, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "deltafs "+e2eVersion+"\n") {
		t.Fatalf("version: exit %d, stdout %q", r.code, r.stdout)
	}
	base, target := pair()
	dir := t.TempDir()
	bp := writeFile(t, dir, "base", base)
	enc := runBinary(t, target, "delta", "encode", "--codec", "best", bp, "-")
	if enc.code != 0 || enc.stderr != "" {
		t.Fatalf("encode: exit %d, stderr %q", enc.code, enc.stderr)
	}
	app := runBinary(t, []byte(enc.stdout), "delta", "apply", bp, "-")
	if app.code != 0 || app.stdout != string(target) {
		t.Fatalf("apply: exit %d, stderr %q, %d bytes", app.code, app.stderr, len(app.stdout))
	}
	requireOneErrorLine(t, runBinary(t, []byte("garbage"), "delta", "apply", bp, "-"), exitFailure, "deltafs: delta apply: ")
	requireOneErrorLine(t, runBinary(t, nil, "delta", "encode", bp), exitUsage, "expects 2 arguments")
	requireOneErrorLine(t, runBinary(t, nil, "frobnicate"), exitUsage, `unknown command "frobnicate"`)
}
