package mount

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestAccessAsksTheLiveFile: a mount without --allow-other has the
// server answer access(2) and the check before chdir (no
// default_permissions, see fs.Options). go-fuse's default answered from
// the mode bits alone: a snapshot's or a revision's file was writable
// for test -w, and an immutable live file too, which the live file
// system refuses to write (EPERM) even to root.
func TestAccessAsksTheLiveFile(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "store"))
	f := filepath.Join(l.mnt, "f")
	if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	snapF, hist := filepath.Join(l.mnt, ".snapshots", "s", "f"), filepath.Join(l.mnt, ".history", "f")
	for _, p := range []string{snapF, filepath.Join(l.mnt, ".snapshots", "s"), hist} {
		if err := unix.Access(p, unix.W_OK); !errors.Is(err, syscall.EROFS) {
			t.Errorf("access %s W_OK: %v, want EROFS", p, err)
		}
		if err := unix.Access(p, unix.R_OK|unix.X_OK); err != nil && p != snapF {
			t.Errorf("access %s R_OK|X_OK: %v", p, err)
		}
	}
	// a 0644 file is not executable, for root neither
	if err := unix.Access(snapF, unix.X_OK); !errors.Is(err, syscall.EACCES) {
		t.Errorf("access X_OK of a 0644 file in a snapshot: %v, want EACCES", err)
	}
	if err := unix.Access(snapF, unix.R_OK); err != nil {
		t.Errorf("access R_OK of a file in a snapshot: %v", err)
	}
	revs, err := os.ReadDir(hist)
	if err != nil || len(revs) == 0 {
		t.Fatalf(".history/f: %v %v", revs, err)
	}
	rev := filepath.Join(hist, revs[0].Name())
	if err := unix.Access(rev, unix.X_OK); !errors.Is(err, syscall.EACCES) {
		t.Errorf("access X_OK of a revision: %v, want EACCES", err)
	}
	if err := unix.Access(f, unix.W_OK|unix.R_OK); err != nil {
		t.Fatalf("access of the live file: %v", err)
	}
	// FS_IOC_SETFLAGS with FS_IMMUTABLE_FL on the live file, behind the
	// mount (root may; the file system must support it, as ext4 does)
	live := filepath.Join(l.store, "live", "f")
	const immutable = 0x10 // FS_IMMUTABLE_FL (linux/fs.h)
	if err := setInodeFlags(live, immutable); err != nil {
		t.Fatalf("no immutable flag on the live file (root on ext4 can set one): %v", err)
	}
	t.Cleanup(func() { setInodeFlags(live, 0) })
	if err := unix.Access(f, unix.W_OK); err == nil {
		t.Errorf("access W_OK of an immutable live file: allowed, want EPERM")
	}
}

// TestAppendOnlyFileTakesAppends: a live file with the append-only flag
// (chattr +a, set behind the mount by root) opens for writing with
// O_APPEND only, on a local disk as through the mount: the mount opened
// every writer without O_APPEND (the kernel sends the offsets), and
// echo x >> file failed with EPERM. The append lands and is recorded.
func TestAppendOnlyFileTakesAppends(t *testing.T) {
	l := start(t, filepath.Join(t.TempDir(), "store"))
	f := filepath.Join(l.mnt, "log")
	if err := os.WriteFile(f, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a snapshot records the new file now, not merged with the append
	// (a new file's grace)
	if err := os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	const appendOnly = 0x20 // FS_APPEND_FL (linux/fs.h)
	live := filepath.Join(l.store, "live", "log")
	if err := setInodeFlags(live, appendOnly); err != nil {
		t.Fatalf("no append-only flag on the live file (root on ext4 can set one): %v", err)
	}
	t.Cleanup(func() { setInodeFlags(live, 0) })
	w, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("open for appending: %v", err)
	}
	if _, err := w.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(f); err != nil || string(b) != "one\ntwo\n" {
		t.Fatalf("after the append: %q %v", b, err)
	}
	if revs, err := os.ReadDir(filepath.Join(l.mnt, ".history", "log")); err != nil || len(revs) != 2 {
		t.Errorf(".history/log after the append: %d revisions, %v; want 2", len(revs), err)
	}
	if _, err := os.OpenFile(f, os.O_WRONLY, 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("open for writing without O_APPEND: %v, want EPERM as on the live file system", err)
	}
}

// setInodeFlags sets the inode flags (FS_IOC_SETFLAGS) of the file at p.
func setInodeFlags(p string, flags int) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.FS_IOC_SETFLAGS, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return e
	}
	return nil
}
