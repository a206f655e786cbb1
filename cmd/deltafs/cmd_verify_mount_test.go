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

// verifyJSON runs "deltafs verify --json" and decodes its report.
func verifyJSON(t *testing.T, path string) (verifyResult, int) {
	t.Helper()
	out, err := exec.Command(binary, "verify", "--json", path).Output()
	var res verifyResult
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("verify --json %s: %v, %v: %s", path, err, jerr, out)
	}
	return res, exitStatus(err)
}

// TestVerifyThroughMount verifies a mounted store through its mount: a
// clean store with a snapshot, a file open for writing whose change is
// pending (not a problem), then a flipped segment byte, found and named.
func TestVerifyThroughMount(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	src := mkdir(t, mnt, "src")
	text := strings.Repeat("a line of text that repeats itself\n", 200)
	for i := range 3 {
		writeFile(t, src, "a.txt", []byte(text+strings.Repeat("more\n", i)))
	}
	writeFile(t, mnt, "b.txt", []byte("bee\n"))
	if err := os.Mkdir(filepath.Join(mnt, ".snapshots", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(mnt, "b.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // before the mount's cleanup: unmounting waits for it
	if _, err := f.WriteString("pending\n"); err != nil {
		t.Fatal(err)
	}
	res, code := verifyJSON(t, filepath.Join(mnt, "src"))
	if code != exitOK || !res.Clean || !res.Mounted || res.Snapshots != 1 || res.LiveFiles != 2 || res.Pending != 1 || res.Revisions < 2 || res.Store != store {
		t.Fatalf("clean mounted store %s: exit %d, %+v", store, code, res)
	}
	// Through the mount, the summary names the store, not the path
	// given: "verify ." in the mount, or the mount point.
	for _, c := range []struct{ dir, arg string }{{mnt, "."}, {"", mnt + "/"}, {filepath.Join(mnt, "src"), "a.txt"}} {
		cmd := exec.Command(binary, "verify", c.arg)
		cmd.Dir = c.dir
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), " live files in "+store+": clean") {
			t.Fatalf("verify %s in %q: %v\n%s", c.arg, c.dir, err, out)
		}
	}
	seg := filepath.Join(store, "segments", "00000001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x20
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, nil, "verify", store)
	if r.code != exitProblems || !strings.Contains(r.stdout, "unreadable") || !strings.Contains(r.stdout, "(src/a.txt) revision") {
		t.Fatalf("flipped byte through the mount: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f.Close()
	b[len(b)/2] ^= 0x20
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p.stop(t, syscall.SIGTERM)
}

// TestVerifyLiveFiles: a live file changed behind the store's back, and
// one that was never recorded, are named with their path, offline.
func TestVerifyLiveFiles(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	writeFile(t, mkdir(t, mnt, "docs"), "notes.txt", []byte("hello\n"))
	p.stop(t, syscall.SIGTERM)
	if res, code := verifyJSON(t, store); code != exitOK || !res.Clean || res.LiveFiles != 1 || res.Mounted {
		t.Fatalf("clean unmounted store: exit %d, %+v", code, res)
	}
	writeFile(t, filepath.Join(store, "live", "docs"), "notes.txt", []byte("hello!\n"))
	writeFile(t, filepath.Join(store, "live"), "stray.txt", []byte("never seen\n"))
	r := runBinary(t, nil, "verify", store)
	want := []string{
		"live docs/notes.txt (file 1 (docs/notes.txt) revision 0): live content (7 bytes) differs from its last revision (6 bytes): a change was not recorded\n",
		"live stray.txt: 11 bytes never recorded: the file has no revision\n",
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("missing %q", w)
		}
	}
	if r.code != exitProblems || !strings.HasSuffix(r.stdout, ": 2 problems\n") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
