package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSnapshotCLIMounted runs the built binary's mount with automatic
// snapshots and drives snapshots and stats from the CLI through it, by
// the store path and by a path inside the mount: the user's story.
func TestSnapshotCLIMounted(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt, "--snapshot-every", "1h", "--keep-snapshots", "3")
	if err := os.MkdirAll(filepath.Join(mnt, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mnt, "src"), "notes.txt", []byte("before\n"))
	if err := os.Mkdir(filepath.Join(mnt, ".snapshots", "before-refactor"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mnt, "src"), "notes.txt", []byte("after\n"))
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("deltafs %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	cli("snapshot", "create", filepath.Join(mnt, "src"), "from-inside")
	cli("snapshot", "rename", store, "from-inside", "after")
	if got := cli("snapshot", "list", mnt); !strings.Contains(got, "before-refactor\t") || !strings.Contains(got, "after\t") {
		t.Fatalf("list: %q", got)
	}
	for name, want := range map[string]string{"before-refactor": "before\n", "after": "after\n"} {
		b, err := os.ReadFile(filepath.Join(mnt, ".snapshots", name, "src", "notes.txt"))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v", name, b, err)
		}
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(cli("stats", "--json", store)), &st); err != nil {
		t.Fatal(err)
	}
	if st["mounted"] != true || st["snapshots"] != 2.0 || st["files"] != 1.0 {
		t.Fatalf("stats through the mount: %v", st)
	}
	out, err := exec.Command(binary, "snapshot", "create", store, "after").CombinedOutput()
	if code := exitStatus(err); code != exitFailure || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("duplicate name: exit %d, %q", code, out)
	}
	cli("snapshot", "delete", store, "after")
	requireOneErrorLine(t, runBinary(t, nil, "snapshot", "delete", mnt, "after"), exitNotFound, "deltafs: snapshot delete: no snapshot named \"after\"\n")
	requireOneErrorLine(t, runBinary(t, nil, "snapshot", "rename", store, "after", "x"), exitNotFound, "deltafs: snapshot rename: no snapshot named \"after\"\n")
	p.stop(t, syscall.SIGTERM)
	if _, err := os.Stat(filepath.Join(store, "control.sock")); !os.IsNotExist(err) {
		t.Fatalf("control socket left after unmount: %v", err)
	}
	// Unmounted now: the same commands open the store directly.
	if got := cli("snapshot", "list", store); !strings.HasPrefix(got, "before-refactor\t") || strings.Count(got, "\n") != 1 {
		t.Fatalf("list after unmount: %q", got)
	}
}

// exitStatus returns the exit code in err (0 for nil).
func exitStatus(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
