package fs

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
)

func TestWaitZeroBoundedByLatestClose(t *testing.T) {
	ctx := context.Background()
	var c atomic.Int32
	var at atomic.Int64
	if waitZero(ctx, &c, &at, closingWait) {
		t.Fatal("waited with nothing closing")
	}
	c.Store(1)
	at.Store(time.Now().Add(-2 * closingWait).UnixNano())
	if waitZero(ctx, &c, &at, closingWait) {
		t.Fatal("waited for a close seen longer than closingWait ago")
	}
	// A FLUSH every few milliseconds (children of a shell under
	// "exec >log" exiting) does not hold the wait past closingWait.
	at.Store(time.Now().UnixNano())
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				at.Store(time.Now().UnixNano())
			}
		}
	}()
	done := make(chan bool)
	go func() { done <- waitZero(ctx, &c, &at, closingWait) }()
	select {
	case waited := <-done:
		if !waited {
			t.Fatal("did not wait for fresh closes")
		}
	case <-time.After(20 * closingWait):
		t.Fatal("closes every 2 ms held the wait for 20 times closingWait")
	}
	close(stop)
	at.Store(time.Now().UnixNano())
	go func() { time.Sleep(5 * time.Millisecond); c.Store(0) }()
	if !waitZero(ctx, &c, &at, closingWait) || c.Load() != 0 {
		t.Fatalf("did not wait for a fresh close's release (closing %d)", c.Load())
	}
}

// A writable handle kept open by a dup of its descriptor (a shell's
// "exec >log") is closed (FLUSH) but never released while it lives; after
// closingWait it no longer holds up the waits of unlinks, renames and
// snapshots.
func TestDupKeptHandleStopsHoldingUpWaits(t *testing.T) {
	testutil.RequireFUSE(t)
	f, err := New(Config{LiveDir: t.TempDir(), Passthrough: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, _ := testutil.Mount(t, f.Root(), Options(false))
	fd, err := syscall.Open(filepath.Join(mnt, "log"), syscall.O_CREAT|syscall.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := syscall.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Close(fd); err != nil { // a FLUSH, no RELEASE
		t.Fatal(err)
	}
	if f.closing.Load() != 1 {
		t.Fatalf("closing %d after the FLUSH, want 1", f.closing.Load())
	}
	ctx := context.Background()
	time.Sleep(closingWait + 10*time.Millisecond)
	if waitZero(ctx, &f.closing, &f.closedAt, closingWait) {
		t.Fatal("a snapshot would still wait for the dup-kept handle")
	}
	if _, err := syscall.Write(dup, []byte("line\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "log"), filepath.Join(mnt, "log.1")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Close(dup); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); f.closing.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("closing %d after the RELEASE", f.closing.Load())
		}
	}
}
