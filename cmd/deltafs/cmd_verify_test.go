package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/objstore"
)

func TestVerifyClean(t *testing.T) {
	dir := makeStore(t, 2, 10)
	r := runCLI(t, nil, "verify", dir)
	if r.code != exitOK || r.stderr != "" || r.stdout != "verified 20 revisions of 2 files, 0 snapshots (0 trees) and 0 live files in "+dir+": clean\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "verify", "--json", dir)
	var res verifyResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != exitOK {
		t.Fatalf("exit %d, %v: %s", r.code, err, r.stdout)
	}
	if !res.Clean || res.Revisions != 20 || res.Files != 2 || res.Problems == nil || len(res.Problems) != 0 {
		t.Fatalf("JSON: %+v", res)
	}
}

// TestVerifyNamesInterruptedRepack: a killed repack's work left in
// STORE/repack/ is no problem (exit 0, clean) but space verify names,
// as stats does (a review: verify said clean and nothing of 161 MB).
func TestVerifyNamesInterruptedRepack(t *testing.T) {
	dir := makeStore(t, 2, 10)
	if err := os.MkdirAll(filepath.Join(dir, "repack", "segments"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "repack", "segments", "00000001.seg"), make([]byte, 12345), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "verify", dir)
	if r.code != exitOK || !strings.Contains(r.stdout, ": clean; an interrupted repack left 12345 bytes in its repack/") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "verify", "--json", dir)
	var res verifyResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != exitOK || !res.Clean || res.InterruptedRepack != 12345 {
		t.Fatalf("exit %d, %v: %s", r.code, err, r.stdout)
	}
}

// corruptSegment flips a byte in the middle of the store's first segment.
func corruptSegment(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "segments", "00000001.seg")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x55
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyProblems(t *testing.T) {
	dir := makeStore(t, 2, 10)
	corruptSegment(t, dir)
	r := runCLI(t, nil, "verify", dir)
	if r.code != exitProblems {
		t.Fatalf("exit %d, want %d; stdout %q stderr %q", r.code, exitProblems, r.stdout, r.stderr)
	}
	line := regexp.MustCompile(`^file \d+ \(dir/file\d\.txt\) revision \d+: .*unreadable`)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	for _, l := range lines[:len(lines)-1] {
		if !line.MatchString(l) {
			t.Errorf("problem line %q", l)
		}
	}
	n := len(lines) - 1
	if n == 0 || lines[n] != fmt.Sprintf("verified 20 revisions of 2 files, 0 snapshots (0 trees) and 0 live files in %s: %s", dir, count(n, "problem")) {
		t.Errorf("summary %q after %d problems", lines[n], n)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, fmt.Sprintf("deltafs: verify: %s found in %s", count(n, "problem"), dir)) {
		t.Errorf("stderr %q", r.stderr)
	}
	r = runCLI(t, nil, "verify", "--json", dir)
	var res verifyResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != exitProblems {
		t.Fatalf("exit %d, %v: %s", r.code, err, r.stdout)
	}
	if res.Clean || len(res.Problems) != n || res.Problems[0].Name == "" || res.Problems[0].File == 0 || res.Problems[0].Error == "" {
		t.Fatalf("JSON: %+v", res)
	}
}

func TestVerifyCannotRun(t *testing.T) {
	requireOneErrorLine(t, runCLI(t, nil, "verify", t.TempDir()), exitNotStore, "not a deltafs store")
	dir := makeStore(t, 1, 2)
	s, err := objstore.Open(dir, objstore.Config{Holder: "/mnt/w"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	requireOneErrorLine(t, runCLI(t, nil, "verify", dir), exitStoreLocked, "(/mnt/w)")
	requireOneErrorLine(t, runCLI(t, nil, "verify"), exitUsage, "expects 1 argument,")
}

func TestExitCodeProblems(t *testing.T) {
	if got := exitCode(fmt.Errorf("x: %w", &problemsError{n: 2, store: "s"})); got != exitProblems {
		t.Fatalf("exit code %d", got)
	}
}

// TestVerifyCountsInWords runs the built binary on a store of one file
// of one revision, clean and then with its one record damaged: every
// count of one is singular ("1 revision of 1 file", "1 problem"), as the
// README's example shows, and so is a usage error's "1 argument".
func TestVerifyCountsInWords(t *testing.T) {
	dir := makeStore(t, 1, 1)
	r := runBinary(t, nil, "verify", dir)
	if want := "verified 1 revision of 1 file, 0 snapshots (0 trees) and 0 live files in " + dir + ": clean\n"; r.code != exitOK || r.stdout != want {
		t.Fatalf("exit %d, stdout %q, want %q (stderr %q)", r.code, r.stdout, want, r.stderr)
	}
	corruptSegment(t, dir)
	r = runBinary(t, nil, "verify", dir)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if want := "verified 1 revision of 1 file, 0 snapshots (0 trees) and 0 live files in " + dir + ": 1 problem"; r.code != exitProblems || len(lines) != 2 || lines[1] != want {
		t.Fatalf("exit %d, stdout %q, want 1 problem line and %q", r.code, r.stdout, want)
	}
	if want := "deltafs: verify: 1 problem found in " + dir + "\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
	requireOneErrorLine(t, runBinary(t, nil, "verify"), exitUsage, "verify: expects 1 argument, got 0")
}
