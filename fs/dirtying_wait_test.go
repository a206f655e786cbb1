package fs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// lateReader is a Recorder that queues every change and reads it only
// when the test says (read), as a recorder with a backlog does: WaitRead
// returns once the changes reported so far are read.
type lateReader struct {
	fs.NopRecorder
	mu     sync.Mutex
	queued []fs.Change
	read   chan struct{} // closed when the queued changes have been read
}

func (r *lateReader) Changed(c fs.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queued = append(r.queued, c)
}

func (r *lateReader) WaitRead(ctx context.Context, _ fs.FileID) error {
	r.mu.Lock()
	pending, read := len(r.queued) > 0, r.read
	r.mu.Unlock()
	if !pending {
		return nil
	}
	select {
	case <-read:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readAll reads the live content of every queued change, then lets the
// waiting writers go.
func (r *lateReader) readAll(t *testing.T) [][]byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for i := range r.queued {
		f, err := r.queued[i].Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(io.NewSectionReader(f, 0, r.queued[i].Size))
		f.Close()
		r.queued[i].Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	r.queued = nil
	close(r.read)
	return out
}

// mountLate mounts a live tree holding db (8 KiB of "a") with rec, no
// passthrough (the mount sees the writes), and opens db for writing.
func mountLate(t *testing.T, rec *lateReader) *os.File {
	t.Helper()
	return mountLateWith(t, rec, nil)
}

// mountLateWith is mountLate that sets *fsys, if fsys is not nil, to the
// live tree.
func mountLateWith(t *testing.T, rec *lateReader, fsys **fs.FS) *os.File {
	t.Helper()
	testutil.RequireFUSE(t)
	live := filepath.Join(t.TempDir(), "live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(live, "db"), bytes.Repeat([]byte("a"), 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := fs.New(fs.Config{LiveDir: live, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if fsys != nil {
		*fsys = f
	}
	mnt, _ := testutil.Mount(t, f.Root(), fs.Options(false))
	db, err := os.OpenFile(filepath.Join(mnt, "db"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A writer that keeps its handle through an fsync and writes again while
// the fsync's change waits in the recorder's queue: the write waits until
// the change has been read, so the revision is the file as it was at the
// fsync, not a mix with the next write. The write is interrupted while it
// waits (a signal: the kernel interrupts the FUSE request, the write
// fails with EINTR and is restarted), and the restarted write waits too.
func TestWriteAfterFsyncWaitsForTheQueuedRead(t *testing.T) {
	for _, interrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("interrupt=%v", interrupt), func(t *testing.T) {
			rec := &lateReader{read: make(chan struct{})}
			db := mountLate(t, rec)
			if _, err := db.WriteAt(bytes.Repeat([]byte("b"), 4096), 0); err != nil {
				t.Fatal(err)
			}
			if err := db.Sync(); err != nil { // reported; the recorder has not read it
				t.Fatal(err)
			}
			wrote := make(chan error, 1)
			tid := make(chan int, 1)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				tid <- unix.Gettid()
				_, err := db.WriteAt(bytes.Repeat([]byte("c"), 4096), 4096)
				wrote <- err
			}()
			writer := <-tid
			for range 5 {
				select {
				case err := <-wrote:
					t.Fatalf("the write went through before the queued change was read (err %v)", err)
				case <-time.After(40 * time.Millisecond):
				}
				if interrupt { // Go's runtime takes SIGURG itself; the write restarts
					if err := unix.Tgkill(os.Getpid(), writer, unix.SIGURG); err != nil {
						t.Fatal(err)
					}
				}
			}
			got := rec.readAll(t)
			want := append(bytes.Repeat([]byte("b"), 4096), bytes.Repeat([]byte("a"), 4096)...)
			if len(got) != 1 || !bytes.Equal(got[0], want) {
				t.Fatalf("the fsync's change read as %d changes, first %q...", len(got), got)
			}
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
		})
	}
}
