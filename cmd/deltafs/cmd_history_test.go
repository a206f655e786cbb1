package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/mount"
)

// newHistoryStore returns an unmounted store where a.txt has three
// revisions ("alpha\n", "alpha, edited\n", then binary bytes) and the
// snapshots s0 and s1 hold the first two; offline snapshots record them.
func newHistoryStore(t *testing.T) (store string, revs [][]byte) {
	t.Helper()
	store = newCLIStore(t)
	live := filepath.Join(store, "live")
	revs = [][]byte{[]byte("alpha\n"), []byte("alpha, edited\n"), {0, 1, 2, 0xff, '\n', 0}}
	for i, r := range revs {
		writeFile(t, live, "a.txt", r)
		if r := runCLI(t, nil, "snapshot", "create", store, "s"+string(rune('0'+i))); r.code != 0 {
			t.Fatalf("snapshot: %+v", r)
		}
	}
	if r := runCLI(t, nil, "snapshot", "delete", store, "s2"); r.code != 0 {
		t.Fatalf("snapshot delete: %+v", r)
	}
	return store, revs
}

func TestHistoryCLIUnmounted(t *testing.T) {
	store, revs := newHistoryStore(t)
	byPath := filepath.Join(store, "live", "a.txt")
	for _, args := range [][]string{{"log", byPath}, {"log", "--store", store, "a.txt"}, {"log", "--store", store, "/a.txt"}} {
		r := runCLI(t, nil, args...)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != 0 || len(lines) != 3 {
			t.Fatalf("%v: %+v", args, r)
		}
		for i, want := range []string{"0\t", "1\t", "2\t"} {
			f := strings.Split(lines[i], "\t")
			if !strings.HasPrefix(lines[i], want) || len(f) != 6 || f[2] != []string{"6", "14", "6"}[i] ||
				f[5] != []string{"s0", "s1", ""}[i] {
				t.Errorf("%v line %d: %q", args, i, lines[i])
			}
			if _, err := time.Parse(time.RFC3339, f[1]); err != nil {
				t.Errorf("time column %q: %v", f[1], err)
			}
		}
	}
	var l mount.FileLog
	r := runCLI(t, nil, "log", "--json", byPath)
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Revisions) != 3 || l.Path != "a.txt" ||
		l.Revisions[1].P1 == nil || l.Revisions[1].P1.Rev != 0 || l.Revisions[0].Base != "full" {
		t.Fatalf("log --json: %v %q", err, r.stdout)
	}
	for _, tc := range []struct {
		args []string
		want []byte
	}{
		{[]string{"--rev", "0"}, revs[0]}, {[]string{"--snapshot", "s1"}, revs[1]}, {nil, revs[2]}, {[]string{"--rev=2"}, revs[2]},
	} {
		r := runCLI(t, nil, append([]string{"cat", byPath}, tc.args...)...)
		if r.code != 0 || r.stdout != string(tc.want) {
			t.Errorf("cat %v: %+v", tc.args, r)
		}
	}
	var cj catJSON
	r = runCLI(t, nil, "cat", "--json", "--store", store, "a.txt", "--rev", "2")
	if err := json.Unmarshal([]byte(r.stdout), &cj); err != nil || !bytes.Equal(cj.Data, revs[2]) || cj.Revision.Rev != 2 {
		t.Fatalf("cat --json: %v %q", err, r.stdout)
	}
	r = runCLI(t, nil, "restore", byPath, "--rev", "0")
	if r.code != 0 || r.stdout != "a.txt: revision 0 restored as revision 3\n" {
		t.Fatalf("restore: %+v", r)
	}
	if r := runCLI(t, nil, "cat", byPath); r.stdout != string(revs[0]) {
		t.Fatalf("cat after restore: %+v", r)
	}
	var rj restoreJSON
	r = runCLI(t, nil, "restore", "--json", byPath, "--rev", "1")
	if err := json.Unmarshal([]byte(r.stdout), &rj); err != nil || rj.From != 1 || rj.Revision.Rev != 4 || rj.Revision.P2.Rev != 1 {
		t.Fatalf("restore --json: %v %q", err, r.stdout)
	}

	outside := t.TempDir()
	writeFile(t, outside, "f", []byte("x"))
	requireOneErrorLine(t, runCLI(t, nil, "log", filepath.Join(outside, "f")), exitNotStore, "not a deltafs store")
	requireOneErrorLine(t, runCLI(t, nil, "cat", filepath.Join(store, "live")), exitIsDir, "is a directory")
	requireOneErrorLine(t, runCLI(t, nil, "cat", "--store", store, "."), exitIsDir, "is a directory")
	requireOneErrorLine(t, runCLI(t, nil, "cat", byPath, "--rev", "99"), exitNotFound, "no revision 99")
	requireOneErrorLine(t, runCLI(t, nil, "cat", byPath, "--snapshot", "s2"), exitNotFound, `no snapshot "s2"`)
	requireOneErrorLine(t, runCLI(t, nil, "restore", byPath, "--rev", "99"), exitNotFound, "no revision 99")
	requireOneErrorLine(t, runCLI(t, nil, "log", "--store", store, "nosuch"), exitNotFound, "no such file")
	requireOneErrorLine(t, runCLI(t, nil, "cat", byPath, "--rev", "0", "--snapshot", "s0"), exitUsage, "not both")
	requireOneErrorLine(t, runCLI(t, nil, "cat", byPath, "--rev", "-1"), exitUsage, "not a revision number")
	requireOneErrorLine(t, runCLI(t, nil, "restore", byPath), exitUsage, "--rev N is required")
}

func TestPrintLogForPeople(t *testing.T) {
	at := time.Date(2026, 11, 29, 23, 15, 2, 0, time.UTC)
	l := mount.FileLog{Revisions: []mount.RevInfo{
		{Rev: 0, Time: at, Size: 8 << 20, Base: "full", Snapshots: []string{"before-refactor", "nightly"}},
		{Rev: 10, Time: at, Size: 512, Base: "intermediate", Chain: 12},
	}}
	var b bytes.Buffer
	if err := printLog(&b, l, true); err != nil {
		t.Fatal(err)
	}
	want := `REV  TIME                  SIZE     BASE          CHAIN  SNAPSHOTS
0    2026-11-29T23:15:02Z  8.0 MiB  full          0      before-refactor,nightly
10   2026-11-29T23:15:02Z  512 B    intermediate  12     -
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 8 << 20: "8.0 MiB", 3 << 40: "3.0 TiB"} {
		if got := humanSize(n); got != want {
			t.Errorf("humanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestLogOnATerminal: on a terminal, log prints a header, aligned columns
// and human sizes.
func TestLogOnATerminal(t *testing.T) {
	store, _ := newHistoryStore(t)
	lines := runOnTerminal(t, "log", "--store", store, "a.txt")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "REV  TIME") || !strings.Contains(lines[1], "6 B ") ||
		strings.Index(lines[0], "SIZE") != strings.Index(lines[2], "14 B") {
		t.Fatalf("log on a terminal:\n%s", strings.Join(lines, "\n"))
	}
}

// TestHistoryJSONSaysDeleted: the --json of log, cat and restore has the
// fields their help lists, "deleted" among them, for a live file too (it
// was left out when false: a script reading it found no such key; built
// binary).
func TestHistoryJSONSaysDeleted(t *testing.T) {
	store, _ := newHistoryStore(t)
	for _, args := range [][]string{
		{"log", "--json", "--store", store, "a.txt"},
		{"cat", "--json", "--store", store, "a.txt"},
		{"restore", "--json", "--store", store, "a.txt", "--rev", "0"},
	} {
		r := runBinary(t, nil, args...)
		var got map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != exitOK {
			t.Fatalf("%v: exit %d, %v, stdout %q stderr %q", args, r.code, err, r.stdout, r.stderr)
		}
		if d, ok := got["deleted"]; !ok || d != false {
			t.Errorf("%v: \"deleted\" is %v (present: %v), want false: %s", args, d, ok, r.stdout)
		}
	}
}

// TestLogDeletedJSONHelp: "log --help" describes the JSON of "log
// --deleted --json" (an array whose revisions is a count), which it did
// not: it described only log's own object (built binary).
func TestLogDeletedJSONHelp(t *testing.T) {
	store, _ := newHistoryStore(t)
	if err := os.Remove(filepath.Join(store, "live", "a.txt")); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, nil, "log", "--deleted", "--json", "--store", store)
	var got []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != exitOK || len(got) != 1 {
		t.Fatalf("exit %d, %v, stdout %q stderr %q", r.code, err, r.stdout, r.stderr)
	}
	help := runBinary(t, nil, "log", "--help").stdout
	_, line, _ := strings.Cut(help, "\n      --json ")
	line, _, _ = strings.Cut(line, "\n")
	_, deleted, ok := strings.Cut(line, "with --deleted")
	if !ok {
		t.Fatalf("log --help's --json says nothing of --deleted: %q", line)
	}
	for key := range got[0] {
		if !strings.Contains(deleted, key) {
			t.Errorf("log --help's --json for --deleted does not name %q: %q", key, deleted)
		}
	}
}
