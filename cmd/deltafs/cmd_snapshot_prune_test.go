package main

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSnapshotUsageAndPruneMounted: a deleted file that two snapshots
// hold is exclusive to neither; deleting one through the mount makes it
// the other's at once, in "snapshot list" and in the xattr of the
// snapshot's directory; prune through the mount keeps what the rules say;
// unmounted, gc frees what the pruned snapshot alone held.
func TestSnapshotUsageAndPruneMounted(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	big := make([]byte, 150_000)
	rand.Read(big)
	writeFile(t, mnt, "big.bin", big)
	writeFile(t, mnt, "notes.txt", []byte("one\n"))
	snap := func(name string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(mnt, ".snapshots", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	snap("a")
	snap("b")
	if err := os.Remove(filepath.Join(mnt, "big.bin")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, mnt, "notes.txt", []byte("two\n"))
	snap("c")
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("deltafs %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	usage := func() map[string]float64 {
		t.Helper()
		var rows []map[string]any
		if err := json.Unmarshal([]byte(cli("snapshot", "list", "--json", store)), &rows); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, r := range rows {
			out[r["name"].(string)] = r["exclusive_bytes"].(float64)
		}
		return out
	}
	xattr := func(name string) uint64 {
		t.Helper()
		buf := make([]byte, 32)
		n, err := unix.Getxattr(filepath.Join(mnt, ".snapshots", name), "user.deltafs.exclusive_bytes", buf)
		if err != nil {
			t.Fatalf("xattr of %s: %v", name, err)
		}
		v, err := strconv.ParseUint(string(buf[:n]), 10, 64)
		if err != nil {
			t.Fatalf("xattr of %s: %q", name, buf[:n])
		}
		return v
	}
	u := usage()
	// a and b share big.bin and notes' first text; c holds notes' second,
	// the live file's newest revision: nothing is any one's alone.
	if len(u) != 3 || u["a"] != 0 || u["b"] != 0 || u["c"] != 0 || xattr("a") != 0 {
		t.Fatalf("usage %v, xattr of a %d: want 0 everywhere", u, xattr("a"))
	}
	cli("snapshot", "delete", store, "b")
	if u := usage(); u["a"] < 150_000 || uint64(u["a"]) != xattr("a") {
		t.Fatalf("after deleting b: usage %v, xattr of a %d; want a to hold big.bin's 150 kB alone", u, xattr("a"))
	}
	if _, err := unix.Getxattr(filepath.Join(mnt, "notes.txt"), "user.deltafs.exclusive_bytes", make([]byte, 32)); err == nil {
		t.Error("a live file has the snapshot xattr")
	}
	if got := cli("snapshot", "list", mnt); !strings.HasPrefix(got, "a\t") || !strings.HasSuffix(strings.SplitN(got, "\n", 2)[0], "\t"+strconv.FormatUint(xattr("a"), 10)) {
		t.Errorf("list: %q", got)
	}
	out := cli("snapshot", "prune", mnt, "--keep-last", "1", "--dry-run")
	if !strings.Contains(out, "keep\tc\t") || !strings.Contains(out, "would remove\ta\t") {
		t.Fatalf("prune --dry-run: %q", out)
	}
	cli("snapshot", "prune", mnt, "--keep-last", "1")
	if u := usage(); len(u) != 1 || u["c"] != 0 {
		t.Fatalf("after prune: %v", u)
	}
	p.stop(t, syscall.SIGTERM)
	var rep map[string]any
	if err := json.Unmarshal([]byte(cli("gc", "--json", store)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep["reclaimed"].(float64) < 140_000 {
		t.Errorf("gc after pruning a: %v", rep)
	}
	cli("verify", store)
	// Offline: prune needs a rule; a dry run keeps everything it lists.
	if out, err := exec.Command(binary, "snapshot", "prune", store).CombinedOutput(); exitStatus(err) != exitUsage {
		t.Errorf("prune without a rule: %v %q", err, out)
	}
	if out := cli("snapshot", "prune", store, "--keep-daily", "1"); !strings.Contains(out, "1 snapshot: kept 1, removed 0") {
		t.Errorf("offline prune: %q", out)
	}
}

// TestPruneColumns: prune's decisions are tab-separated columns, the
// action first, whatever the action; on a terminal they are aligned.
func TestPruneColumns(t *testing.T) {
	store := newCLIStore(t)
	for _, name := range []string{"s1", "s2", "s3"} {
		if r := runBinary(t, nil, "snapshot", "create", store, name); r.code != 0 {
			t.Fatalf("create: %+v", r)
		}
	}
	check := func(args []string, want [][2]string) {
		t.Helper()
		r := runBinary(t, nil, append([]string{"snapshot", "prune", store}, args...)...)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != 0 || len(lines) != len(want)+1 {
			t.Fatalf("prune %v: %+v", args, r)
		}
		for i, w := range want {
			f := strings.Split(lines[i], "\t")
			if f[0] != w[0] || f[1] != w[1] || len(f) != map[bool]int{true: 4, false: 3}[w[0] == "keep"] {
				t.Errorf("prune %v: line %q: want the columns %q, %q, its time and (if kept) its rules", args, lines[i], w[0], w[1])
			}
		}
	}
	check([]string{"--keep-last", "1", "--dry-run"}, [][2]string{{"keep", "s3"}, {"would remove", "s2"}, {"would remove", "s1"}})

	lines := runOnTerminal(t, "snapshot", "prune", store, "--keep-last", "1", "--dry-run")
	if len(lines) != 4 || strings.Contains(strings.Join(lines, "\n"), "\t") || strings.Index(lines[0], "s3") != strings.Index(lines[1], "s2") ||
		strings.Index(lines[0], "s3") != len("would remove  ") {
		t.Fatalf("prune on a terminal:\n%s", strings.Join(lines, "\n"))
	}

	check([]string{"--keep-last", "2"}, [][2]string{{"keep", "s3"}, {"keep", "s2"}, {"remove", "s1"}})
}
