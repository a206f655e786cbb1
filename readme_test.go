package deltafs_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestCIRunsREADMETestCommand keeps README.md and .ci/run in step: the
// test command on the README's first screen (the line marked "# run the
// tests") must be the command CI runs, with -race.
func TestCIRunsREADMETestCommand(t *testing.T) {
	readme, ci := readmeAndCI(t)
	var command string
	for line := range strings.Lines(string(readme)) {
		if before, ok := strings.CutSuffix(strings.TrimSpace(line), "# run the tests"); ok {
			command = strings.TrimSpace(before)
			break
		}
	}
	if command == "" || !strings.Contains(command, "-race") {
		t.Fatalf("README.md has no test command with -race marked %q (found %q)", "# run the tests", command)
	}
	if !strings.Contains(string(ci), " "+command+"\n") {
		t.Fatalf(".ci/run does not run the README's test command %q", command)
	}
}

// TestREADMEListsCIPackages: the README's CI paragraph names every Debian
// package .ci/run installs (it listed five of eight: not acl, e2fsprogs
// and mount, which the ACL and full-disk tests need under CI=true).
func TestREADMEListsCIPackages(t *testing.T) {
	readme, ci := readmeAndCI(t)
	m := regexp.MustCompile(`(?m)^PACKAGES=\(([^)]*)\)`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run has no PACKAGES=(...) line")
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	_, after, ok := strings.Cut(text, "It installs only ")
	_, after, ok2 := strings.Cut(after, "(")
	list, _, ok3 := strings.Cut(after, ")")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`README.md has no "It installs only ... (PACKAGES)" in its CI paragraph`)
	}
	for _, p := range strings.Fields(string(m[1])) {
		if !strings.Contains(list, "`"+p+"`") {
			t.Errorf("README's CI package list %q does not name %q, which .ci/run installs", list, p)
		}
	}
}

// readmeAndCI returns README.md and .ci/run.
func readmeAndCI(t *testing.T) (readme, ci []byte) {
	t.Helper()
	var err error
	if readme, err = os.ReadFile("README.md"); err != nil {
		t.Fatal(err)
	}
	if ci, err = os.ReadFile(".ci/run"); err != nil {
		t.Fatal(err)
	}
	return readme, ci
}
