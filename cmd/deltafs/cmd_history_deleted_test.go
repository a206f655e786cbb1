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

// TestHistoryCLIDeleted is "I deleted it by mistake" with the built
// binary: a file removed, the store remounted, then log --deleted, log,
// cat and restore by the path it had (each saying on stderr that it
// found a deleted file), through the mount and with --store offline; and
// a name that is not UTF-8 through the mount, printed as it is.
func TestHistoryCLIDeleted(t *testing.T) {
	store, mnt := newMountDirs(t)
	run := func(args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.Command(binary, args...)
		var eb strings.Builder
		cmd.Stderr = &eb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("deltafs %q: %v; stderr %q", args, err, eb.String())
		}
		return string(out), eb.String()
	}
	p := startMount(t, store, mnt)
	bad := "r\xff\x80port.txt"
	if err := os.Mkdir(filepath.Join(mnt, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, mnt, "docs/notes.txt", []byte("draft one\n"))
	writeFile(t, mnt, bad, []byte("bytes\n"))
	if out, _ := run("log", filepath.Join(mnt, bad)); !strings.HasPrefix(out, "0\t") {
		t.Fatalf("log of %q: %q", bad, out)
	}
	if out, _ := run("cat", filepath.Join(mnt, bad)); out != "bytes\n" {
		t.Fatalf("cat of %q: %q", bad, out)
	}
	if out, _ := run("restore", filepath.Join(mnt, bad), "--rev", "0"); out != bad+": revision 0 restored as revision 1\n" {
		t.Fatalf("restore of %q: %q", bad, out)
	}
	for _, f := range []string{"docs/notes.txt", bad, "docs"} {
		if err := os.Remove(filepath.Join(mnt, f)); err != nil {
			t.Fatal(err)
		}
	}
	p.stop(t, syscall.SIGTERM)
	p = startMount(t, store, mnt)

	out, _ := run("log", "--deleted", mnt)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "\t2\t"+bad) || !strings.HasSuffix(lines[1], "\t1\tdocs/notes.txt") {
		t.Fatalf("log --deleted: %q", out)
	}
	if out, _ := run("log", "--deleted", filepath.Join(mnt, "docs")); strings.Count(out, "\n") != 1 {
		t.Fatalf("log --deleted docs: %q", out)
	}
	notes := filepath.Join(mnt, "docs", "notes.txt") // docs/ itself is gone too
	out, errOut := run("cat", notes)
	if out != "draft one\n" || !strings.Contains(errOut, "docs/notes.txt was deleted") {
		t.Fatalf("cat of the deleted file: %q, stderr %q", out, errOut)
	}
	var l struct {
		Path      string
		File      uint64
		Deleted   bool
		Revisions []json.RawMessage
	}
	out, _ = run("log", "--json", notes)
	if err := json.Unmarshal([]byte(out), &l); err != nil || !l.Deleted || l.Path != "docs/notes.txt" || len(l.Revisions) != 1 {
		t.Fatalf("log --json of the deleted file: %q, %v", out, err)
	}
	if out, _ := run("restore", notes); out != "docs/notes.txt: deleted file "+jsonNum(l.File)+" made again from its revision 0, as revision 1\n" {
		t.Fatalf("restore of the deleted file: %q", out)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "draft one\n" {
		t.Fatalf("restored file: %q, %v", b, err)
	}
	c := exec.Command(binary, "restore", notes)
	if b, err := c.CombinedOutput(); exitStatus(err) != exitUsage || !strings.Contains(string(b), "--rev N is required") {
		t.Fatalf("restore of a live file without --rev: %v, %q", err, b)
	}
	p.stop(t, syscall.SIGTERM)

	// Offline, with --store and the file's id.
	out, _ = run("log", "--deleted", "--store", store)
	if !strings.HasSuffix(out, "\t"+bad+"\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("offline log --deleted: %q", out)
	}
	id := strings.Split(out, "\t")[2]
	if out, _ := run("cat", "--store", store, "--id", id); out != "bytes\n" {
		t.Fatalf("offline cat --id %s: %q", id, out)
	}
	if out, _ := run("restore", "--store", store, "--id", id, "--rev", "0"); !strings.HasPrefix(out, bad+": deleted file "+id+" made again") {
		t.Fatalf("offline restore --id %s: %q", id, out)
	}
	if b, err := os.ReadFile(filepath.Join(store, "live", bad)); err != nil || string(b) != "bytes\n" {
		t.Fatalf("offline restored file: %q, %v", b, err)
	}
	if out, _ := run("log", "--deleted", store); out != "" {
		t.Fatalf("log --deleted STORE after the restores: %q", out)
	}
	if out, _ := run("log", "--deleted", "--json", "--store", store); out != "[]\n" {
		t.Fatalf("log --deleted --json with none: %q", out)
	}
	c = exec.Command(binary, "cat", "--store", store, "nosuch")
	if b, err := c.CombinedOutput(); exitStatus(err) != exitNotFound || !strings.Contains(string(b), "nosuch: no such file, nor a deleted file's history") {
		t.Fatalf("cat of a path no file had: %v, %q", err, b)
	}
}

// jsonNum formats n as the CLI prints it.
func jsonNum(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
