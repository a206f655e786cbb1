package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil/storetest"
)

// newCLIStore creates an unmounted store whose live tree holds two files.
func newCLIStore(t *testing.T) string {
	return storetest.NewOffline(t, map[string]string{"a.txt": "alpha\n", "b.txt": strings.Repeat("beta\n", 100)})
}

func TestSnapshotCLIUnmounted(t *testing.T) {
	store := newCLIStore(t)
	if r := runCLI(t, nil, "snapshot", "create", store, "before"); r.code != 0 || !strings.Contains(r.stdout, "snapshot before taken") {
		t.Fatalf("create: %+v", r)
	}
	writeFile(t, filepath.Join(store, "live"), "a.txt", []byte("alpha, edited\n"))
	if r := runCLI(t, nil, "snapshot", "create", store, "after"); r.code != 0 {
		t.Fatalf("second create: %+v", r)
	}
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "create", store, "after"), exitFailure, "already exists")
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "create", store, ".."), exitUsage, "invalid name")
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "create", store, strings.Repeat("x", 256)), exitUsage, "invalid name")
	// A control character would break the list's lines and columns.
	for _, name := range []string{"a\nb", "a\tb", "del\x7f", "\x01"} {
		requireOneErrorLine(t, runCLI(t, nil, "snapshot", "create", store, name), exitUsage, "invalid name")
		requireOneErrorLine(t, runCLI(t, nil, "snapshot", "rename", store, "after", name), exitUsage, "contains a control character")
	}
	// The names of automatic snapshots are theirs (--keep-snapshots
	// retires by name): a user can neither take one nor rename to one.
	const autoName = "auto-2026-11-30T16:37:17Z"
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "create", store, autoName), exitUsage, "reserved for automatic snapshots")
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "rename", store, "after", autoName), exitUsage, "reserved for automatic snapshots")
	if r := runCLI(t, nil, "snapshot", "rename", store, "before", "first"); r.code != 0 {
		t.Fatalf("rename: %+v", r)
	}
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "delete", store, "before"), exitNotFound, "deltafs: snapshot delete: no snapshot named \"before\"\n")
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "rename", store, "before", "x"), exitNotFound, "deltafs: snapshot rename: no snapshot named \"before\"\n")
	r := runCLI(t, nil, "snapshot", "list", store)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "first\t") || !strings.HasPrefix(lines[1], "after\t") {
		t.Fatalf("list: %+v", r)
	}
	r = runCLI(t, nil, "snapshot", "list", "--json", store)
	var list []struct{ Name string }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 {
		t.Fatalf("list --json: %v %q", err, r.stdout)
	}
	if r := runCLI(t, nil, "snapshot", "delete", store, "first"); r.code != 0 {
		t.Fatalf("delete: %+v", r)
	}
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "list", t.TempDir()), exitNotStore, "not a deltafs store")
}

// TestSnapshotListControlNames: a name with control characters, which
// an older build accepted, is listed quoted, one line per snapshot.
func TestSnapshotListControlNames(t *testing.T) {
	list := []index.Snapshot{{ID: 1, Name: "old\nname"}, {ID: 2, Name: "tab\there"}, {ID: 3, Name: "plain \"name\""}}
	var b strings.Builder
	if err := printSnapshots(&b, list, nil, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{`"old\nname"`, `"tab\there"`, `plain "name"`}
	if len(lines) != len(want) {
		t.Fatalf("%d lines for %d snapshots: %q", len(lines), len(want), b.String())
	}
	for i, l := range lines {
		if f := strings.Split(l, "\t"); len(f) != 3 || f[0] != want[i] {
			t.Errorf("line %q: want 3 columns, the first %s", l, want[i])
		}
	}
}

func TestStatsJSON(t *testing.T) {
	store := newCLIStore(t)
	runCLI(t, nil, "snapshot", "create", store, "s1")
	writeFile(t, filepath.Join(store, "live"), "a.txt", []byte("alpha, edited\n"))
	runCLI(t, nil, "snapshot", "create", store, "s2")
	r := runCLI(t, nil, "stats", "--json", store)
	if r.code != 0 {
		t.Fatalf("stats: %+v", r)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"files": 2, "revisions": 3, "snapshots": 2, "logical_bytes": 6 + 500 + 14}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if _, ok := m["max_chain"].(float64); !ok {
		t.Errorf("max_chain missing: %v", m)
	}
	if sb, ok := m["stored_bytes"].(float64); !ok || sb <= 0 {
		t.Errorf("stored_bytes = %v", m["stored_bytes"])
	}
	r = runCLI(t, nil, "stats", store)
	if r.code != 0 || !strings.Contains(r.stdout, "snapshots     2") {
		t.Fatalf("stats text: %+v", r)
	}
}
