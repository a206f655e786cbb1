package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// statLine is what the kernel caches of a file and a snapshot may move.
func statLine(t *testing.T, p string) string {
	t.Helper()
	var st syscall.Stat_t
	mustDo(t, syscall.Lstat(p, &st))
	return fmt.Sprintf("ino=%d mode=%o nlink=%d size=%d mtime=%d ctime=%d", st.Ino, st.Mode, st.Nlink, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
}

// TestSnapshotKeepsKernelAttrsFresh: a snapshot gives a FileID to a
// regular file that has none (a store's older files, made before the
// mount gave IDs at creation); the xattr moves the file's ctime, and
// stat through the mount must show it, not the kernel's cached ctime
// (kept for an hour). Files made through the mount by mknod(2) or an
// O_CREAT read-only open have their ID from the start.
func TestSnapshotKeepsKernelAttrsFresh(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	l.stop(t)
	live := filepath.Join(store, liveDir)
	mustDo(t, os.MkdirAll(live+"/sub", 0o755))
	mustDo(t, os.WriteFile(live+"/old", []byte("older store"), 0o644))
	mustDo(t, os.WriteFile(live+"/sub/old", nil, 0o644))
	l = start(t, store)
	m := l.mnt
	mustDo(t, syscall.Mknod(m+"/node", syscall.S_IFREG|0o644, 0))
	fd, err := syscall.Open(m+"/ro", syscall.O_CREAT|syscall.O_RDONLY, 0o644)
	mustDo(t, err)
	mustDo(t, syscall.Close(fd))
	names := []string{"old", "sub/old", "node", "ro"}
	for _, n := range names {
		statLine(t, filepath.Join(m, n)) // the kernel caches these
	}
	time.Sleep(20 * time.Millisecond)
	mustDo(t, os.Mkdir(m+"/.snapshots/s1", 0o755))
	for _, n := range names {
		if got, want := statLine(t, filepath.Join(m, n)), statLine(t, filepath.Join(live, n)); got != want {
			t.Errorf("%s after a snapshot: the mount shows %s, the live file is %s", n, got, want)
		}
	}
}

// TestSnapshotNameMissIsNotCached: a snapshot taken over the control
// socket (the CLI, or a timer) appears in .snapshots behind the
// kernel's back, so a lookup that missed it just before must not be
// kept.
func TestSnapshotNameMissIsNotCached(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	p := l.mnt + "/.snapshots/cli"
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat %s: %v", p, err)
	}
	ctx := context.Background()
	c, closeFn, err := Connect(ctx, store, false, quiet())
	mustDo(t, err)
	defer closeFn()
	_, err = c.CreateSnapshot(ctx, "cli")
	mustDo(t, err)
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("stat %s once taken over the socket: %v", p, err)
	}
}
