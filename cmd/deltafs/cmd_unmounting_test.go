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

// TestDamagedStoreCLI: a store whose last segment was cut short is
// refused by gc (one line, exit 1), which records the damage; stats then
// shows it, in its text and its JSON, and verify exits 8.
func TestDamagedStoreCLI(t *testing.T) {
	store := makeStore(t, 2, 3)
	segs, err := filepath.Glob(filepath.Join(store, "segments", "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	last := segs[len(segs)-1]
	st, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, st.Size()-100); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "gc", "--dry-run", store)
	requireOneErrorLine(t, r, exitFailure, "segment shorter than the committed tail")
	r = runCLI(t, nil, "stats", store)
	if r.code != exitOK || !strings.Contains(r.stdout, "damaged       ") || !strings.Contains(r.stdout, "segment shorter than the committed tail") {
		t.Errorf("stats: %+v", r)
	}
	r = runCLI(t, nil, "stats", "--json", store)
	if r.code != exitOK || !strings.Contains(r.stdout, `"damage": "`) {
		t.Errorf("stats --json: %+v", r)
	}
	if r := runCLI(t, nil, "verify", store); r.code != exitProblems {
		t.Errorf("verify: %+v", r)
	}
}
