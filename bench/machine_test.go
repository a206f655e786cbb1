package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSourceNamesTheMeasuredCheckout: with -deltafs-src, a report names
// the commit the deltafs measured was built from, not only the runner's.
func TestSourceNamesTheMeasuredCheckout(t *testing.T) {
	if commitOf(".") == "" {
		t.Skip("not run from a git checkout")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=b", "-c", "user.email=b@l", "commit", "-q", "--allow-empty", "-m", "old"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	old := strings.TrimSpace(string(out))
	var b strings.Builder
	writeSource(&b, dir)
	if !strings.Contains(b.String(), "deltafs built from "+dir+" (commit "+old+")") {
		t.Fatalf("with -deltafs-src: %q, want %s's commit %s", b.String(), dir, old)
	}
	b.Reset()
	writeSource(&b, ".")
	if !strings.HasPrefix(b.String(), "Source: commit "+commitOf(".")) {
		t.Fatalf("without: %q", b.String())
	}
}
