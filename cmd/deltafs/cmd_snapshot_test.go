package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
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
	requireOneErrorLine(t, runCLI(t, nil, "snapshot", "rename", store, "before", "after"), exitFailure, "deltafs: snapshot rename: snapshot \"after\": already exists\n")
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
	if err := printSnapshots(&b, list, nil, false, false); err != nil {
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

// TestSnapshotListSizes: as log does, snapshot list gives exact byte
// counts when its output is not a terminal (three tab-separated fields,
// the third the --json exclusive_bytes), and on a terminal a header,
// aligned columns and human sizes.
func TestSnapshotListSizes(t *testing.T) {
	store := storetest.NewOffline(t, map[string]string{"big.txt": string(testutil.Bytes(1, 3000))})
	if r := runBinary(t, nil, "snapshot", "create", store, "first"); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	writeFile(t, filepath.Join(store, "live"), "big.txt", testutil.Bytes(2, 3000))
	if r := runBinary(t, nil, "snapshot", "create", store, "second"); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	var rows []struct {
		Name           string `json:"name"`
		ExclusiveBytes uint64 `json:"exclusive_bytes"`
	}
	if r := runBinary(t, nil, "snapshot", "list", "--json", store); json.Unmarshal([]byte(r.stdout), &rows) != nil || len(rows) != 2 || rows[0].ExclusiveBytes < 1024 {
		t.Fatalf("list --json: %+v; want first to hold over 1 KiB alone", r)
	}
	r := runBinary(t, nil, "snapshot", "list", store)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("list: %+v", r)
	}
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 3 || f[0] != rows[i].Name || f[2] != strconv.FormatUint(rows[i].ExclusiveBytes, 10) {
			t.Errorf("piped line %q: want %s, its time and %d bytes, tab-separated", l, rows[i].Name, rows[i].ExclusiveBytes)
		}
	}
	lines = runOnTerminal(t, "snapshot", "list", store)
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME    TIME") || strings.Contains(strings.Join(lines, ""), "\t") ||
		!strings.HasSuffix(lines[1], "  "+humanSize(rows[0].ExclusiveBytes)) || strings.Index(lines[0], "EXCLUSIVE") != strings.Index(lines[2], humanSize(rows[1].ExclusiveBytes)) {
		t.Fatalf("list on a terminal:\n%s", strings.Join(lines, "\n"))
	}
}

// TestSnapshotNameHelp: "snapshot create" and "rename" refuse a bad new
// name with a usage error that points at their --help, which said
// nothing of names; it now gives the rules the errors cite (built
// binary).
func TestSnapshotNameHelp(t *testing.T) {
	for _, cmd := range []string{"create", "rename"} {
		r := runBinary(t, nil, "snapshot", cmd, "--help")
		for _, want := range []string{"auto-YYYY-MM-DDTHH:MM:SSZ are reserved", "control character", "at most\n255 bytes"} {
			if r.code != exitOK || !strings.Contains(r.stdout, want) {
				t.Errorf("deltafs snapshot %s --help: exit %d, no %q in:\n%s", cmd, r.code, want, r.stdout)
			}
		}
	}
}

// TestLogHelpNamesEveryKind: "deltafs log --help" names every way a
// revision can be stored, as its BASE column prints it (it missed
// p1+p2).
func TestLogHelpNamesEveryKind(t *testing.T) {
	r := runBinary(t, nil, "log", "--help")
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(r.stdout, func(c rune) bool { return strings.ContainsRune(" \n\t,;:()", c) }) {
		words[w] = true
	}
	for _, k := range index.Kinds() {
		if !words[k.String()] {
			t.Errorf("deltafs log --help does not name the base kind %q:\n%s", k, r.stdout)
		}
	}
}
