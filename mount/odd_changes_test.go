// Changes made in unusual ways (a mapping kept past a close, an
// allocation past the end, an unlink under an open writer), found by a
// review of what the recorded revisions hold.

package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMappedWritesAfterAPassthroughCloseAreRecorded is a review's
// repro: a writer that opened a file while a reader held it open gets a
// passthrough handle, maps the file shared, writes through the mapping,
// closes its descriptor and writes through the mapping again. The
// kernel maps the live file itself and releases the handle at the
// close, so the second write reaches the live file behind the mount.
// The file's next change (an ordinary write through the mount) must be
// recorded whole: recorded as its written range on the last revision,
// it left the mapped bytes out of every revision for good.
func TestMappedWritesAfterAPassthroughCloseAreRecorded(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "mp")
	mustDo(t, os.WriteFile(p, bytes.Repeat([]byte("."), 64<<10), 0o644))
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "a"), 0o755))
	reader, err := os.Open(p) // a passthrough reader: the writer's open is one too
	mustDo(t, err)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	mustDo(t, err)
	m, err := syscall.Mmap(int(f.Fd()), 0, 64<<10, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	mustDo(t, err)
	copy(m[0:100], bytes.Repeat([]byte("K"), 100))
	mustDo(t, f.Close())
	mustDo(t, reader.Close())
	time.Sleep(200 * time.Millisecond) // the releases reach the mount
	copy(m[100:200], bytes.Repeat([]byte("L"), 100))
	mustDo(t, syscall.Munmap(m))
	time.Sleep(50 * time.Millisecond)
	w, err := os.OpenFile(p, os.O_RDWR, 0)
	mustDo(t, err)
	_, err = w.WriteAt([]byte("zzzz"), 60000)
	mustDo(t, err)
	mustDo(t, w.Close())
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "b"), 0o755))
	want, err := os.ReadFile(p)
	mustDo(t, err)
	if !bytes.Equal(want[100:200], bytes.Repeat([]byte("L"), 100)) {
		t.Fatalf("the live file lacks the mapped write (setup): %q", want[100:200])
	}
	got := readOr(t, filepath.Join(l.mnt, ".snapshots", "b", "mp"))
	if got != string(want) {
		t.Fatalf("the revision after the next change differs from the live file: K %v, L %v, z %v",
			got[0:100] == string(want[0:100]), got[100:200] == string(want[100:200]), got[60000:60004] == "zzzz")
	}
	l.stop(t)
	verifyClean(t, store)
}

// TestAllocationPastTheEndRecordsNothing: fallocate with the size kept,
// entirely past the end of the file (a preallocation, or a hole punched
// where the file has none), changes no byte and records no revision (a
// review found one the same as the revision before); one inside the
// file still does.
func TestAllocationPastTheEndRecordsNothing(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	p := filepath.Join(l.mnt, "f")
	mustDo(t, os.WriteFile(p, bytes.Repeat([]byte("x"), 64<<10), 0o644))
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "a"), 0o755))
	time.Sleep(300 * time.Millisecond) // past a new file's grace (a change within it joins the first revision)
	revs := func() int {
		lg, err := connect(t, l.mnt, false).Log(context.Background(), Target{Path: "f"})
		mustDo(t, err)
		return len(lg.Revisions)
	}
	for _, mode := range []uint32{unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_PUNCH_HOLE,
		unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_ZERO_RANGE} {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		mustDo(t, err)
		mustDo(t, unix.Fallocate(int(f.Fd()), mode, 1<<20, 1<<20))
		mustDo(t, f.Close())
		mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", fmt.Sprintf("m%d", mode)), 0o755))
		if n := revs(); n != 1 {
			t.Fatalf("fallocate mode %#x past the end: %d revisions, want 1", mode, n)
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	mustDo(t, err)
	mustDo(t, unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE|unix.FALLOC_FL_PUNCH_HOLE, 4096, 8192))
	mustDo(t, f.Close())
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "inside"), 0o755))
	if n := revs(); n != 2 {
		t.Fatalf("a hole punched inside the file: %d revisions, want 2", n)
	}
	l.stop(t)
	verifyClean(t, store)
}

// TestNewFileUnlinkedWhileOpenIsNamed: a new file unlinked while its
// writer still holds it open is recorded at the close, and its history
// is a deleted file's under the path it had (a review found it listed
// with an empty path, and log of the path said no such file).
func TestNewFileUnlinkedWhileOpenIsNamed(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, "d1"), 0o755))
	f, err := os.Create(filepath.Join(l.mnt, "d1", "u3"))
	mustDo(t, err)
	_, err = f.Write([]byte("written, then unlinked while open\n"))
	mustDo(t, err)
	mustDo(t, os.Remove(filepath.Join(l.mnt, "d1", "u3")))
	mustDo(t, f.Close())
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "a"), 0o755))
	c := connect(t, l.mnt, false)
	list := deletedPaths(t, c, "d1")
	if len(list) != 1 || list[0].Path != "d1/u3" {
		t.Fatalf("deleted under d1: %+v", list)
	}
	lg, err := c.Log(context.Background(), Target{Path: "d1/u3"})
	if err != nil || !lg.Deleted || len(lg.Revisions) != 1 {
		t.Fatalf("log of the path: %+v, %v", lg, err)
	}
}
