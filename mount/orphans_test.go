package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestUnreleasedHandleRecordedAtShutdown: a writable handle the kernel
// never releases (here the connection is aborted under it, as an unmount
// aborts it with a RELEASE still queued) is recorded when the mount shuts
// down.
func TestUnreleasedHandleRecordedAtShutdown(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	data := testutil.Bytes(3, 100_000)
	f, err := os.Create(filepath.Join(l.mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	writeAtT(t, f, 0, data)
	testutil.AbortFUSE(t, l.mnt)
	select {
	case err := <-l.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mount did not shut down after its connection was aborted")
	}
	l.cancel()
	l.cancel = nil
	f.Close() // the connection is gone
	fdsSurviveGC(t)
	if err := unix.Unmount(l.mnt, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	st2, revs := revisions(t, store)
	if len(revs[1]) != 1 {
		t.Fatalf("%d revisions of the unreleased file, want 1", len(revs[1]))
	}
	if got, err := st2.Get(context.Background(), revs[1][0].ID()); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("its revision reads back %d bytes (%v), want the written %d", len(got), err, len(data))
	}
}

// fdsSurviveGC opens files (taking the descriptor numbers a shut-down
// mount freed), collects the garbage the mount left and checks that every
// descriptor still names its file: ReleaseOrphans once closed a handle's
// fd by number while the handle's *os.File still owned it, and its
// finalizer then closed the number again, whatever file, socket or live
// file of a pending change it named by then (the flaky failures of
// TestIgnoredEventsAreNotQueued: a put that could not read its file;
// TestMountedSnapshotControl: the control socket hung up).
func fdsSurviveGC(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	var files []*os.File
	for i := range 32 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run in their own goroutine
	}
	for i, f := range files {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Errorf("descriptor %d of file %d closed under it by a garbage collection: %v", f.Fd(), i, err)
		}
	}
}
