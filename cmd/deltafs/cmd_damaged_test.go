package main

import (
	"os"
	"strings"
	"testing"
)

// storeCommands are the commands that open a store given as P, and with
// M an empty mount point.
var storeCommands = [][]string{
	{"mount", "P", "M"}, {"stats", "P"}, {"verify", "P"}, {"gc", "P"}, {"repack", "P"},
	{"log", "--store", "P", "a.txt"}, {"cat", "--store", "P", "a.txt"}, {"restore", "--store", "P", "a.txt", "--rev", "0"},
	{"snapshot", "create", "P", "s"}, {"snapshot", "list", "P"},
}

// withPaths replaces P and M in a command by store and mnt.
func withPaths(c []string, store, mnt string) []string {
	args := make([]string, len(c))
	for i, a := range c {
		args[i] = strings.NewReplacer("P", store, "M", mnt).Replace(a)
	}
	return args
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
