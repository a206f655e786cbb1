package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// storeCommands are the commands that open a store given as P, and with
// M an empty mount point.
var storeCommands = [][]string{
	{"mount", "P", "M"}, {"stats", "P"}, {"verify", "P"}, {"gc", "P"}, {"repack", "P"}, {"salvage", "P"},
	{"log", "--store", "P", "a.txt"}, {"log", "--deleted", "--store", "P"}, {"cat", "--store", "P", "a.txt"}, {"restore", "--store", "P", "a.txt", "--rev", "0"},
	{"snapshot", "create", "P", "s"}, {"snapshot", "list", "P"}, {"snapshot", "delete", "P", "s"},
	{"snapshot", "rename", "P", "s", "t"}, {"snapshot", "prune", "P", "--keep-last", "1"},
}

// withPaths replaces P and M in a command by store and mnt.
func withPaths(c []string, store, mnt string) []string {
	args := make([]string, len(c))
	for i, a := range c {
		args[i] = strings.NewReplacer("P", store, "M", mnt).Replace(a)
	}
	return args
}

// treeOf lists every path under dir.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestStoreIndexMissing: a store whose index/ is gone is reported as such
// (exit 5) by every command, and none of them creates anything in it (an
// empty index made the store look like one of an unsupported format).
func TestStoreIndexMissing(t *testing.T) {
	store := newCLIStore(t)
	if err := os.RemoveAll(filepath.Join(store, "index")); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, store)
	for _, c := range storeCommands {
		args := withPaths(c, store, t.TempDir())
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			r := runCLI(t, nil, args...)
			requireOneErrorLine(t, r, exitNotStore, store+": index missing")
			if after := treeOf(t, store); !slices.Equal(before, after) {
				t.Fatalf("the store changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// TestStoreIsAFile: a store path that is a regular file is no store
// (exit 5, one line) for every command, the mount included.
func TestStoreIsAFile(t *testing.T) {
	file := writeFile(t, t.TempDir(), "file", []byte("not a store\n"))
	for _, c := range storeCommands {
		args := withPaths(c, file, t.TempDir())
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			requireOneErrorLine(t, runCLI(t, nil, args...), exitNotStore, file)
			if b, err := os.ReadFile(file); err != nil || string(b) != "not a store\n" {
				t.Fatalf("the file changed: %q %v", b, err)
			}
		})
	}
}
