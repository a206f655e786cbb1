package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMountTargets mounts a go-fuse loopback and a deltafs mount the way
// the mount suite does, runs small versions of the workload children in
// them and checks what they report and what the store recorded.
func TestMountTargets(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root here")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	env := testEnv(t)
	env.Opts.Runs = 1
	bin, err := env.buildDeltafsFrom("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []fsKind{kindLoopback, kindDeltafs} {
		tg, err := env.setup(kind, bin, false)
		if err != nil {
			t.Fatal(err)
		}
		size := strconv.Itoa(1 << 20)
		w, err := env.child(tg, "seqwrite", "-size", size, "-block", "65536")
		if err == nil {
			_, err = env.child(tg, "seqread", "-size", size, "-block", "65536")
		}
		if err == nil {
			_, err = env.child(tg, "randwrite", "-size", size, "-ops", "200", "-sync-every", "50")
		}
		var saves phase
		if err == nil {
			saves, err = runM5Small(env, tg)
		}
		if terr := tg.teardown(); err == nil {
			err = terr
		}
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if w.bytes != 1<<20 || w.wall <= 0 {
			t.Fatalf("%s: seqwrite reported %+v", kind, w)
		}
		if kind == kindDeltafs {
			revs, growth, err := storeGrowth(env.ctx, tg.store)
			if err != nil || revs < 2 || growth <= 0 || growth > 20*saves.bytes {
				t.Fatalf("deltafs: %d revisions, growth %d for deltas of %d bytes (%v)", revs, growth, saves.bytes, err)
			}
		}
		if err := tg.remove(); err != nil {
			t.Fatal(err)
		}
	}
}

func runM5Small(env *Env, tg *target) (phase, error) {
	s, err := env.Child("mount", "saves", "-dir", tg.dir, "-size", strconv.Itoa(256<<10), "-saves", "5")
	if err != nil {
		return phase{}, err
	}
	var sum int64
	for _, d := range s.Result.Sizes["delta"] {
		sum += d
	}
	if _, err := os.Stat(filepath.Join(tg.dir, "notes.txt")); err != nil {
		return phase{}, err
	}
	return phase{wall: s.Wall, bytes: sum}, nil
}

// TestMkfiles checks M4's tree builder and its 10-file changes on a plain
// directory: every change lands on an existing file, each round on others,
// and the 10 files of a round in 10 directories, at every size.
func TestMkfiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := childMkfiles(context.Background(), []string{"-dir", dir, "-ops", "2000"}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "tree", "d*", "f*"))
	if len(files) != 2000 {
		t.Fatalf("%d files, want 2000", len(files))
	}
	for k := range 3 {
		if err := touch10(dir, 2000, k); err != nil {
			t.Fatal(err)
		}
		dirs := map[string]bool{}
		for _, f := range files {
			if b, _ := os.ReadFile(f); string(b) == fmt.Sprintf("round %d\n", k) {
				dirs[filepath.Dir(f)] = true
			}
		}
		if len(dirs) != 10 {
			t.Fatalf("round %d changed files in %d directories, want 10", k, len(dirs))
		}
	}
	changed := 0
	for _, f := range files {
		if b, _ := os.ReadFile(f); strings.HasPrefix(string(b), "round") {
			changed++
		}
	}
	if changed != 30 {
		t.Fatalf("%d files changed by three rounds, want 30", changed)
	}
}
