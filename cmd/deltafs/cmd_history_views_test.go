package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestHistoryOfViews: log and cat of .snapshots, .history or a snapshot's
// directory name a directory (exit 10, as the README's table says);
// a file inside a view has no history of its own (exit 9). The same
// through the mount and on the unmounted store.
func TestHistoryOfViews(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	writeFile(t, mnt, "x.txt", []byte("hi\n"))
	if err := os.Mkdir(filepath.Join(mnt, ".snapshots", "s1"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(where string, arg func(rel string) []string) {
		for _, tt := range []struct {
			rel  string
			code int
		}{
			{".snapshots", exitIsDir},
			{".history", exitIsDir},
			{".snapshots/s1", exitIsDir},
			{".snapshots/s1/x.txt", exitNotFound},
		} {
			for _, cmd := range []string{"log", "cat"} {
				r := runBinary(t, nil, append([]string{cmd}, arg(tt.rel)...)...)
				if r.code != tt.code {
					t.Errorf("%s %s %s: exit %d, want %d (%q)", where, cmd, tt.rel, r.code, tt.code, r.stderr)
				}
				requireOneErrorLine(t, r, tt.code, "deltafs: "+cmd+": ")
			}
		}
	}
	check("mounted", func(rel string) []string { return []string{filepath.Join(mnt, rel)} })
	p.stop(t, syscall.SIGTERM)
	check("unmounted", func(rel string) []string { return []string{"--store", store, rel} })
}
