package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/objstore"
)

// TestCommandsWhileUnmounting: a command given a store whose lock a
// mount process holds while its mount point no longer shows it (the
// mount was unmounted and records what was pending before it lets the
// store go) says so and to try again once umount returns, exit 4, one
// line; a store held by a mount still mounted, or by another command,
// gets the plain lock error.
func TestCommandsWhileUnmounting(t *testing.T) {
	store := newCLIStore(t)
	gone := t.TempDir() // where the mount was: no mount there now
	for _, c := range []struct {
		holder string
		pid    string // written over the lock's pid, if set
		hint   bool
	}{
		{"mounted on " + gone, "", true},
		{"verify", "", false},
		// A pid of another pid namespace (a container's mount) names
		// another process here, which does not hold the lock file.
		{"mounted on " + gone, "1", false},
	} {
		st, err := objstore.Open(store, objstore.Config{Holder: c.holder})
		if err != nil {
			t.Fatal(err)
		}
		if c.pid != "" {
			if err := os.WriteFile(filepath.Join(store, "LOCK"), []byte("pid "+c.pid+"\nholder "+c.holder+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"stats", store}, {"snapshot", "list", store}, {"log", "--store", store, "a.txt"}, {"gc", store}} {
			r := runCLI(t, nil, args...)
			requireOneErrorLine(t, r, exitStoreLocked, "is locked by")
			said := strings.Contains(r.stderr, "it is unmounting from "+gone+", and records what was pending before it lets the store go; try again once 'deltafs umount' returns")
			if said != c.hint {
				t.Errorf("%v, store held by %q: %q; want the unmounting hint: %v", args, c.holder, r.stderr, c.hint)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
