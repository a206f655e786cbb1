package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// killMount starts a mount of store on mnt, records x.txt in it (log
// answers through the mount) and SIGKILLs the mount process, leaving
// the store as a crash does: the index's logs half-written, its lock
// free, the mount point dead.
func killMount(t *testing.T, store, mnt string) {
	t.Helper()
	p := startMount(t, store, mnt)
	writeFile(t, mnt, "x.txt", []byte("hi\n"))
	if r := runBinary(t, nil, "log", filepath.Join(mnt, "x.txt")); r.code != 0 || !strings.HasPrefix(r.stdout, "0\t") {
		t.Fatalf("log in the mount: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Cmd.Wait()
}

// TestReadOnlyAfterSIGKILL: after a mount is killed, the read-only
// commands on the unmounted store work (they recover the index first)
// without badger's "might result in data loss", and so does a read-only
// mount.
func TestReadOnlyAfterSIGKILL(t *testing.T) {
	store, mnt := newMountDirs(t)
	killMount(t, store, mnt)
	if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"log", "--store", store, "x.txt"},
		{"stats", store},
		{"snapshot", "list", store},
		{"cat", "--store", store, "x.txt"},
	} {
		r := runBinary(t, nil, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%v after SIGKILL: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if args[0] == "log" && !strings.HasPrefix(r.stdout, "0\t") || args[0] == "cat" && r.stdout != "hi\n" {
			t.Fatalf("%v: %q", args, r.stdout)
		}
	}
	killMount(t, store, mnt)
	if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	p := startMount(t, store, mnt, "--read-only")
	if want := "deltafs: mounted store " + store + " read-only on " + mnt + " "; !strings.HasPrefix(p.Ready, want) {
		t.Errorf("read-only mount says %q, want it to start %q", p.Ready, want)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "x.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("read-only mount after SIGKILL: %q, %v", b, err)
	}
	// one plain reason, no package or sentinel names stacked before it
	requireOneErrorLine(t, runBinary(t, nil, "snapshot", "create", mnt, "s"), exitFailure, "deltafs: snapshot create: snapshot \"s\": store is read-only\n")
	requireOneErrorLine(t, runBinary(t, nil, "snapshot", "delete", mnt, "s"), exitFailure, "deltafs: snapshot delete: store is read-only\n")
	p.stop(t, syscall.SIGTERM)
	if r := runBinary(t, nil, "verify", store); r.code != 0 {
		t.Fatalf("verify: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}
