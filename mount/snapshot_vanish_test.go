package mount

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
)

// TestSnapshotOfVanishedFile removes one file and replaces another (a
// rename over it, as an editor saves) between the build's stat of them
// and the snapshot's read: the snapshot succeeds (it failed with "open
// ...: no such file or directory"), leaves the removed file out, and
// holds the replacing file's content under the name, as if it had
// reached them a moment later. The changes are made in the live
// directory itself, behind the mount's back: made through the mount,
// they would wait until the snapshot is done (fs/freeze.go), and the
// snapshot waits for this hook.
func TestSnapshotOfVanishedFile(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	live := filepath.Join(store, liveDir)
	var hooked atomic.Int32
	l := startWith(t, Config{Store: store, testRevisions: func(r *liveRevs) fs.Revisions {
		return growingRevs{r, func(path string, size int64) {
			switch filepath.Base(path) {
			case "doomed":
				if hooked.CompareAndSwap(0, 1) {
					mustDo(t, os.Remove(filepath.Join(live, "doomed")))
				}
			case "swapped":
				if hooked.CompareAndSwap(1, 2) {
					mustDo(t, os.Rename(filepath.Join(live, "new"), filepath.Join(live, "swapped")))
				}
			}
		}}
	}})
	mnt := l.mnt
	for name, text := range map[string]string{"doomed": "old doomed", "swapped": "old swapped", "new": "new swapped"} {
		mustDo(t, os.WriteFile(filepath.Join(mnt, name), []byte(text), 0o644))
	}
	mustDo(t, os.Mkdir(filepath.Join(mnt, ".snapshots", "s1"), 0o755))
	if hooked.Load() != 2 {
		t.Fatalf("the hook ran %d times of 2", hooked.Load())
	}
	ents, err := os.ReadDir(filepath.Join(mnt, ".snapshots", "s1"))
	mustDo(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	// new is in the snapshot if the build statted it before the rename.
	if s := fmt.Sprint(names); s != "[swapped]" && s != "[new swapped]" {
		t.Fatalf("snapshot lists %v, want swapped (and maybe new)", names)
	}
	got, err := os.ReadFile(filepath.Join(mnt, ".snapshots", "s1", "swapped"))
	if err != nil || string(got) != "new swapped" {
		t.Fatalf("snapshot's swapped: %q, %v; want the replacing file's content", got, err)
	}
	l.stop(t)
	verifyClean(t, store)
}

// TestSnapshotsUnderChurn is the reviewer's repro: two writers create,
// write and remove files in a loop while snapshots are taken; every
// snapshot succeeds (about 1 in 5 failed with ENOENT). The writers pause
// a little now and then, so that the recorder keeps up and the snapshots
// (which wait for it) end while they churn; they stop after 3 s, or
// once 3 snapshots have ended if that takes longer (a loaded machine: up
// to 30 s).
func TestSnapshotsUnderChurn(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := startWith(t, Config{Store: store})
	began := time.Now()
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var churned atomic.Int64
	for _, w := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				p := filepath.Join(l.mnt, fmt.Sprintf("churn%s.%d.tmp", w, i%50))
				if err := os.WriteFile(p, []byte("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), 0o644); err != nil {
					t.Error(err)
					return
				}
				if err := os.Remove(p); err != nil {
					t.Error(err)
					return
				}
				churned.Add(1)
				if i%20 == 19 {
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	var failed []error
	during := 0
	for i := 0; ctx.Err() == nil && during < 8 && (during < 3 || time.Since(began) < 3*time.Second); i++ {
		start := time.Now()
		if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", fmt.Sprintf("w%d", i)), 0o755); err != nil {
			failed = append(failed, err)
		}
		if ctx.Err() == nil {
			during++
		}
		t.Logf("snapshot %d: %v, %d churned", i, time.Since(start), churned.Load())
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	t.Logf("%d files created and removed", churned.Load())
	if during < 3 {
		t.Fatalf("only %d snapshots ended while the files churned", during)
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d snapshots failed: %v", len(failed), during, failed)
	}
	l.stop(t)
	verifyClean(t, store)
}
