package main

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGCCLI is the user's story with the built binary and a real mount: a
// file deleted after a snapshot and one deleted before any; gc refuses
// the mounted store; unmounted, it removes what only the deleted file
// held, keeps what the snapshot holds until the snapshot is deleted, and
// the store verifies clean after each step.
func TestGCCLI(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	noise := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	for i := range 3 {
		writeFile(t, mnt, "notes.txt", []byte(strings.Repeat("notes, version ", 100+i)))
	}
	writeFile(t, mnt, "held.bin", noise(200_000))
	time.Sleep(1500 * time.Millisecond) // past the new-file hold-back: recorded
	if err := os.Mkdir(filepath.Join(mnt, ".snapshots", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, mnt, "scratch.bin", noise(300_000))
	time.Sleep(1500 * time.Millisecond)
	for _, name := range []string{"held.bin", "scratch.bin"} {
		if err := os.Remove(filepath.Join(mnt, name)); err != nil {
			t.Fatal(err)
		}
	}
	if out := cliWant(t, exitStoreLocked, "gc", store); !strings.Contains(out, mnt) || strings.Count(out, "\n") != 1 {
		t.Errorf("gc of a mounted store: %q does not name the mount point %s in one line", out, mnt)
	}
	p.stop(t, syscall.SIGTERM)

	gc := func(args ...string) map[string]any {
		t.Helper()
		var rep map[string]any
		out := cliWant(t, exitOK, append([]string{"gc", "--json"}, append(args, store)...)...)
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("gc --json: %v\n%s", err, out)
		}
		return rep
	}
	dry := gc("--dry-run")
	if dry["removed"] != 1.0 || dry["reclaimed"] != 0.0 || dry["live_files"] != 1.0 {
		t.Fatalf("dry run: %v", dry)
	}
	rep := gc()
	if rep["removed"] != 1.0 || rep["reclaimed"].(float64) < 250_000 {
		t.Fatalf("gc: want scratch.bin's revision removed and its 300 kB reclaimed: %v", rep)
	}
	cliWant(t, exitOK, "verify", store)
	cliWant(t, exitOK, "snapshot", "delete", store, "s1")
	rep = gc()
	if rep["removed"] != 1.0 || rep["reclaimed"].(float64) < 150_000 {
		t.Fatalf("gc after deleting s1: want held.bin's revision removed: %v", rep)
	}
	cliWant(t, exitOK, "verify", store)
	if out := cliWant(t, exitOK, "gc", store); !strings.Contains(out, "removed 0 of") {
		t.Errorf("third gc: %q", out)
	}
	// The live file reads back through a new mount.
	p = startMount(t, store, mnt)
	b, err := os.ReadFile(filepath.Join(mnt, "notes.txt"))
	if err != nil || string(b) != strings.Repeat("notes, version ", 102) {
		t.Errorf("notes.txt after gc: %d bytes, %v", len(b), err)
	}
	p.stop(t, syscall.SIGTERM)
}

func TestGCCommandErrors(t *testing.T) {
	dir := makeStore(t, 1, 3)
	requireOneErrorLine(t, runCLI(t, nil, "gc", t.TempDir()), exitNotStore, "not a deltafs store")
	for want, args := range map[string][]string{
		`bad duration "soon"`: {"gc", "--keep-within", "soon", dir},
		`bad duration "-1d"`:  {"gc", "--keep-within", "-1d", dir},
		"expects 1 argument,": {"gc"},
	} {
		requireOneErrorLine(t, runCLI(t, nil, args...), exitUsage, want)
	}
	for in, want := range map[string]time.Duration{"36h": 36 * time.Hour, "30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1.5d": 36 * time.Hour} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// TestRepackAfterGCRemovedFile is the reviewer's shell session: a file
// deleted and unmounted, gc removes it entirely, and repack (--reuse=never,
// then a plain one after a change) must still work: it looked up the
// removed file's revision Revs-1 and failed for good (exit 9).
func TestRepackAfterGCRemovedFile(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	writeFile(t, mnt, "a", []byte("a\n"))
	writeFile(t, mnt, "b", []byte("b\n"))
	time.Sleep(500 * time.Millisecond)
	if err := os.Remove(filepath.Join(mnt, "b")); err != nil {
		t.Fatal(err)
	}
	cliWant(t, exitOK, "umount", mnt)
	p.wait(t)
	if out := cliWant(t, exitOK, "gc", store); !strings.Contains(out, "removed 1 of 2 revisions (1 file entirely)") {
		t.Fatalf("gc: %s", out)
	}
	cliWant(t, exitOK, "repack", "--reuse=never", store)
	p = startMount(t, store, mnt)
	writeFile(t, mnt, "a", []byte("a, changed\n"))
	cliWant(t, exitOK, "umount", mnt)
	p.wait(t)
	cliWant(t, exitOK, "repack", store)
	cliWant(t, exitOK, "verify", store)
	if out := cliWant(t, exitOK, "cat", "--store", store, "a"); out != "a, changed\n" {
		t.Fatalf("cat a after repack: %q", out)
	}
}

// TestHistoryAfterPruningGC: gc --prune-unsnapshotted leaves a live
// file's newest revision, numbered past 0; the mount then lists it under
// .history, records the next revision after it (listed too: the listing
// grew by revision number, not by count, and asked for a revision gc had
// removed), and verify finds the live file and its history agree.
func TestHistoryAfterPruningGC(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	for i := range 3 {
		writeFile(t, mnt, "a", []byte(strings.Repeat("version ", i+1)))
		time.Sleep(1500 * time.Millisecond) // past the new-file hold-back: recorded
	}
	cliWant(t, exitOK, "umount", mnt)
	p.wait(t)
	if out := cliWant(t, exitOK, "gc", "--prune-unsnapshotted", store); !strings.Contains(out, "removed 2 of 3 revisions") {
		t.Fatalf("gc: %s", out)
	}
	p = startMount(t, store, mnt)
	revs := func() []string {
		t.Helper()
		ents, err := os.ReadDir(filepath.Join(mnt, ".history", "a"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, strings.SplitN(e.Name(), "@", 2)[0])
		}
		return names
	}
	if got := strings.Join(revs(), " "); got != "0002" { // the store's numbers, as deltafs log
		t.Fatalf(".history/a after gc lists %q, want revision 2 (0002)", got)
	}
	writeFile(t, mnt, "a", []byte("version 4"))
	time.Sleep(1500 * time.Millisecond)
	if got := strings.Join(revs(), " "); got != "0002 0003" {
		t.Fatalf(".history/a after a write lists %q, want revisions 2 and 3", got)
	}
	cliWant(t, exitOK, "verify", mnt)
	if out := cliWant(t, exitOK, "cat", filepath.Join(mnt, "a")); out != "version 4" {
		t.Fatalf("cat: %q", out)
	}
	cliWant(t, exitOK, "umount", mnt)
	p.wait(t)
	cliWant(t, exitOK, "verify", store)
}

// cliWant runs deltafs with args and fails t unless it exits with want;
// it returns stdout and stderr together.
func cliWant(t *testing.T, want int, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if code := exitStatus(err); code != want {
		t.Fatalf("deltafs %v: exit %d, want %d\n%s", args, code, want, out)
	}
	return string(out)
}

// TestOfflineCommandsGivenMountPath: gc, repack and mount --read-only
// take a store; given the mount point of a mounted one (or a path in
// it), as stats, verify and the snapshot commands take, they said "not a
// deltafs store (no FORMAT file)", exit 5. They now say whose mount it is
// and what to do, as for the store itself: in use, exit 4 (built binary).
func TestOfflineCommandsGivenMountPath(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	defer p.stop(t, syscall.SIGTERM)
	if err := os.Mkdir(filepath.Join(mnt, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{mnt, filepath.Join(mnt, "sub")} {
		for _, args := range [][]string{{"gc", path}, {"repack", path}, {"mount", "--read-only", path, t.TempDir()}} {
			r := runBinary(t, nil, args...)
			requireOneErrorLine(t, r, exitStoreLocked, "store "+store+" is mounted on "+mnt)
			if !strings.Contains(r.stderr, "deltafs umount "+mnt) {
				t.Errorf("%v: %q does not say how to unmount", args, r.stderr)
			}
		}
	}
}
