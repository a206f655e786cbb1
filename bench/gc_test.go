package main

import (
	"path/filepath"
	"testing"
)

// TestGCChildren runs the G1 children on a small store: 10 snapshots, half
// of them deleted; a pruning gc removes revisions and shrinks the store,
// the plan changes nothing, usage covers every snapshot left.
func TestGCChildren(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	dir := filepath.Join(env.Work, "G", "store")
	small := []string{"-dir", dir, "-files", "20", "-rounds", "100", "-edits", "3", "-every", "10", "-size", "2048"}
	b, err := env.Child("gc", "gcbuild", append(small, "-delete-half")...)
	if err != nil {
		t.Fatal(err)
	}
	if b.Result.Sizes["snapshots"][0] != 5 || b.Result.Sizes["revisions"][0] < 300 {
		t.Fatalf("build: %v", b.Result.Sizes)
	}
	u, err := env.Child("gc", "gcusage", "-dir", dir)
	if err != nil || u.Result.Sizes["snapshots"][0] != 5 || u.CPU <= 0 {
		t.Fatalf("usage: %+v, %v", u, err)
	}
	plan, err := env.Child("gc", "gcrun", "-dir", dir, "-policy", "plan")
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Result.Sizes
	if p["removed"][0] == 0 || p["after"][0] != p["before"][0] {
		t.Fatalf("plan: %v", p)
	}
	g, err := env.Child("gc", "gcrun", "-dir", dir, "-policy", "prune")
	if err != nil {
		t.Fatal(err)
	}
	z := g.Result.Sizes
	if z["removed"][0] < p["removed"][0] || z["after"][0] >= z["before"][0] || g.MaxRSS <= 0 {
		t.Fatalf("gc --prune-unsnapshotted: %v (plan of the default policy: %v)", z, p)
	}
}
