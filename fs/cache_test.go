package fs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"golang.org/x/sys/unix"
)

// attrsOf is the part of a stat the kernel caches and a content change
// moves.
func attrsOf(t testing.TB, p string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("ino=%d size=%d mtime=%d ctime=%d", st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())
}

// sameAttrsSoon waits until stat through the mount shows the live file's
// attributes (the kernel sends RELEASE after close(2) returns) and fails
// if it still does not after a few seconds: a stale cache lasts an hour.
func sameAttrsSoon(t testing.TB, m *mounted, name string) {
	t.Helper()
	var got, want string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, want = attrsOf(t, m.path(name)), attrsOf(t, filepath.Join(m.live, name)); got == want {
			return
		}
	}
	t.Fatalf("%s: the mount shows %s, the live file is %s", name, got, want)
}

// TestLiveMissIsCached: a lookup of a missing live name is kept as a
// negative entry (names appear in the live tree only through the
// kernel), so a search path does not cost a LOOKUP per stat. Seen here
// through a name made behind the mount's back, which the cache hides.
func TestLiveMissIsCached(t *testing.T) {
	m := mountLive(t)
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"missing", "d/missing"} {
		if _, err := os.Lstat(m.path(name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(m.live, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(m.path(name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat %s after a miss: %v, want the cached miss", name, err)
		}
	}
	// A name made through the mount replaces its negative entry.
	if _, err := os.Lstat(m.path("new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat new: %v", err)
	}
	f, err := os.OpenFile(m.path("new"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Mkdir(m.path("newdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("newdir"), m.path("missing2")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"new", "missing2"} {
		if _, err := os.Lstat(m.path(name)); err != nil {
			t.Fatalf("stat %s: %v", name, err)
		}
	}
}

// TestHistoryMissIsNotCached: .history's names appear when live files
// do, behind the kernel's back as far as .history is concerned, so a
// miss there must not be kept.
func TestHistoryMissIsNotCached(t *testing.T) {
	m := mountLive(t)
	h := m.path(".history/later")
	if _, err := os.Lstat(h); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat %s: %v", h, err)
	}
	if err := os.WriteFile(m.path("later"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(h); err != nil {
		t.Fatalf("stat %s once the file exists: %v", h, err)
	}
}

// TestMmapWriteShowsInStat: a write through a shared mapping of a file
// open for writing reaches the live file without a WRITE (always so for
// a passthrough writer: O_TRUNC or created); once the writer is
// released, stat through the mount must show the file's new mtime and
// ctime, not the ones the kernel cached before (for an hour).
func TestMmapWriteShowsInStat(t *testing.T) {
	m := mountPassthrough(t)
	for _, c := range []struct {
		name  string
		flags int
	}{
		{"trunc", os.O_RDWR | os.O_TRUNC}, // passthrough
		{"created", os.O_RDWR | os.O_CREATE | os.O_EXCL},
		{"inplace", os.O_RDWR}, // cached I/O mode
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.flags&os.O_CREATE == 0 {
				if err := os.WriteFile(m.path(c.name), make([]byte, 4096), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f, err := os.OpenFile(m.path(c.name), c.flags, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(8192); err != nil {
				t.Fatal(err)
			}
			b, err := unix.Mmap(int(f.Fd()), 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			attrsOf(t, m.path(c.name)) // the kernel caches these
			time.Sleep(20 * time.Millisecond)
			copy(b[100:], "written through a mapping")
			if err := unix.Msync(b, unix.MS_SYNC); err != nil {
				t.Fatal(err)
			}
			if err := unix.Munmap(b); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			sameAttrsSoon(t, m, c.name)
		})
	}
}

// TestNewFilesHaveIDsAtCreation: a regular file made by mknod(2) or by
// an O_CREAT open without write access gets its FileID before the
// reply, so that no snapshot gives it one (moving its ctime) behind the
// kernel's back later.
func TestNewFilesHaveIDsAtCreation(t *testing.T) {
	m := mountLive(t)
	if err := syscall.Mknod(m.path("node"), syscall.S_IFREG|0o644, 0); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(m.path("ro"), syscall.O_CREAT|syscall.O_RDONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	for _, name := range []string{"node", "ro"} {
		var id fs.FileID
		if n, err := unix.Lgetxattr(filepath.Join(m.live, name), fs.XattrID, id[:]); err != nil || n != len(id) {
			t.Errorf("%s: FileID xattr: %d bytes, %v", name, n, err)
		}
		sameAttrsSoon(t, m, name)
	}
}
