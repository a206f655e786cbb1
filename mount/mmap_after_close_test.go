package mount

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
