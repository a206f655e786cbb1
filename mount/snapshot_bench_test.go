package mount

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
)

// BenchmarkMountedSnapshot is M4 through a real mount: "mkdir
// .snapshots/NAME" in a tree of n files (100 per directory) after 10
// files in 10 directories were changed through the mount since the
// previous snapshot. With fsync=true each change is recorded before the
// timer starts (fsync waits for that): the snapshot's own cost. With
// fsync=false they are only closed, as M4 does: the snapshot waits for
// the recorder to record them, in a store whose live tree holds n files.
// The tree is laid into the store's live directory before mounting, so
// the first snapshot (not timed) walks it all.
func BenchmarkMountedSnapshot(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, synced := range []bool{true, false} {
			b.Run(fmt.Sprintf("files=%d/fsync=%v", n, synced), func(b *testing.B) {
				benchSnapshots(b, n, synced)
			})
		}
	}
}

func benchSnapshots(b *testing.B, n int, synced bool) {
	store := filepath.Join(b.TempDir(), "store")
	dirs := layTree(b, store, n)
	l := startBench(b, store)
	if err := os.Mkdir(l.mnt+"/.snapshots/base", 0o755); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		b.StopTimer()
		for k := range 10 {
			p := fmt.Sprintf("%s/%s/f%03d", l.mnt, dirs[(i*10+k)*7%len(dirs)], k)
			write(b, p, fmt.Appendf(nil, "revision %d", i), synced)
		}
		b.StartTimer()
		if err := os.Mkdir(fmt.Sprintf("%s/.snapshots/s%d", l.mnt, i), 0o755); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// write rewrites p; with synced it fsyncs it, which returns once the
// mount has recorded the change (recording is then the close's cost,
// not the snapshot's).
func write(b *testing.B, p string, data []byte, synced bool) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil && synced {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
}

// layTree creates a store whose live directory holds n empty files, 100
// per directory, 10 directories per parent; it returns the directories.
func layTree(b *testing.B, store string, n int) []string {
	b.Helper()
	st, err := objstore.Open(store, objstore.Config{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	st.Close()
	var dirs []string
	for d := 0; d*100 < n; d++ {
		rel := fmt.Sprintf("t%03d/s%02d", d/10, d%10)
		dir := filepath.Join(store, liveDir, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			fh, err := os.Create(fmt.Sprintf("%s/f%03d", dir, f))
			if err != nil {
				b.Fatal(err)
			}
			fh.Close()
		}
		dirs = append(dirs, rel)
	}
	return dirs
}

// startBench mounts store for a benchmark and unmounts it at cleanup.
func startBench(b *testing.B, store string) *live {
	b.Helper()
	testutil.RequireFUSE(b)
	l := &live{store: store, mnt: b.TempDir(), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	go func() {
		cfg := Config{Store: store, MountPoint: l.mnt, Ready: func(*Mounted) { close(ready) }}
		l.done <- Run(ctx, cfg)
	}()
	select {
	case <-ready:
	case err := <-l.done:
		b.Fatalf("mount failed: %v", err)
	}
	b.Cleanup(func() {
		cancel()
		if err := <-l.done; err != nil {
			b.Errorf("Run: %v", err)
		}
	})
	return l
}

// BenchmarkSnapshotAfterInPlaceWrite is the reviewer's repro through a
// real mount: a 4 KiB in-place write into a 256 MiB file (sparse, made
// by truncate), then "mkdir .snapshots/NAME", which waits for the
// write's recording and names the file's newest revision. Reported: the
// bytes of live files the snapshot read (live-B/op; it was the whole
// file) and the heap left after a collection (live-heap-MiB).
func BenchmarkSnapshotAfterInPlaceWrite(b *testing.B) {
	const size = 256 << 20
	var revs *liveRevs
	l := startWith(b, Config{Store: filepath.Join(b.TempDir(), "s.dfs"),
		testRevisions: func(r *liveRevs) fs.Revisions { revs = r; return r }})
	p := filepath.Join(l.mnt, "vm.img")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(l.mnt+"/.snapshots/base", 0o755); err != nil {
		b.Fatal(err)
	}
	block := testutil.Bytes(3, 4096)
	read0, i := revs.read.Load(), 0
	for b.Loop() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteAt(block, int64(i+1)*1000*4096%size)
		}
		if err == nil {
			err = f.Close()
		}
		if err == nil {
			err = os.Mkdir(fmt.Sprintf("%s/.snapshots/k%d", l.mnt, i), 0o755)
		}
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(revs.read.Load()-read0)/float64(i), "live-B/op")
	runtime.GC()
	b.ReportMetric(float64(heapBytes())/(1<<20), "live-heap-MiB")
}
