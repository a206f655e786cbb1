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
	setFlags := func(flags int) error {
		fd, err := unix.Open(live, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.FS_IOC_SETFLAGS, uintptr(unsafe.Pointer(&flags)))
		if e != 0 {
			return e
		}
		return nil
	}
	const immutable = 0x10 // FS_IMMUTABLE_FL (linux/fs.h)
	if err := setFlags(immutable); err != nil {
		t.Fatalf("no immutable flag on the live file (root on ext4 can set one): %v", err)
	}
	t.Cleanup(func() { setFlags(0) })
	if err := unix.Access(f, unix.W_OK); err == nil {
		t.Errorf("access W_OK of an immutable live file: allowed, want EPERM")
	}
}
