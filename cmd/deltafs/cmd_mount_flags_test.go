package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMountFlagErrors: mount refuses a negative duration or count, and
// flags that would do nothing, as a usage error before it creates the
// store or mounts anything. Zero keeps its meaning.
func TestMountFlagErrors(t *testing.T) {
	tests := []struct {
		flags []string
		want  string
	}{
		{[]string{"--snapshot-every", "-1s"}, "--snapshot-every -1s: must not be negative"},
		{[]string{"--fsync-interval", "-1s"}, "--fsync-interval -1s: must not be negative"},
		{[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout -1s: must not be negative"},
		{[]string{"--snapshot-every", "1h", "--keep-snapshots", "-1"}, "--keep-snapshots -1: must not be negative"},
		{[]string{"--snapshot-every", "-1s", "--keep-snapshots", "-1", "--fsync-interval", "-1s", "--shutdown-timeout", "-1s"}, "--fsync-interval -1s: must not be negative"},
		{[]string{"--keep-snapshots", "3"}, "--keep-snapshots needs --snapshot-every"},
		{[]string{"--snapshot-every", "0", "--keep-snapshots", "3"}, "--keep-snapshots needs --snapshot-every"},
		{[]string{"--read-only", "--snapshot-every", "1h"}, "--snapshot-every needs a writable mount"},
		{[]string{"--exclude", "*.swp", "--exclude", "build//x"}, `bad --exclude pattern "build//x": an empty path component (a doubled or trailing slash)`},
		{[]string{"--exclude", "[a-"}, `bad --exclude pattern "[a-": unbalanced [ ] or a trailing backslash`},
		{[]string{"--exclude", "../x"}, `bad --exclude pattern "../x": a ".." component`},
		{[]string{"--exclude", "/"}, `bad --exclude pattern "/": empty`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.flags, " "), func(t *testing.T) {
			store, mnt := newMountDirs(t)
			r := refusedMount(t, store, mnt, tt.flags...)
			requireOneErrorLine(t, r, exitUsage, "deltafs: mount: "+tt.want)
			if _, err := os.Stat(store); !os.IsNotExist(err) {
				t.Errorf("the refused mount made the store: %v", err)
			}
			if ents, err := os.ReadDir(mnt); err != nil || len(ents) != 0 {
				t.Errorf("mount point after the refused mount: %v %v", ents, err)
			}
		})
	}
}

// TestMountFlagZeros: zero is not refused: the default interval and
// timeout, no automatic snapshots, keep them all.
func TestMountFlagZeros(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt, "--fsync-interval", "0", "--shutdown-timeout", "0", "--snapshot-every", "0", "--keep-snapshots", "0")
	writeFile(t, mnt, "f", []byte("x"))
	p.stop(t, syscall.SIGTERM)
	if _, err := os.Stat(filepath.Join(store, "FORMAT")); err != nil {
		t.Fatal(err)
	}
}
