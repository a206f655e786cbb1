package fs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// The setuid and setgid bits a write or truncation drops (killpriv.go)
// are compared with a plain directory, where the kernel drops them.

const nobody = testutil.Nobody

func writeAt0(p string) error {
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	_, err = syscall.Pwrite(fd, []byte("x"), 0)
	return err
}

// openTrunc opens p with O_TRUNC (atomic O_TRUNC: the mount truncates
// at open) and closes it unwritten.
func openTrunc(p string) error {
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return syscall.Close(fd)
}

func ftruncate1(p string) error {
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return syscall.Ftruncate(fd, 1)
}

func createAndWrite(p string, created *uint32) error {
	// setuid from the start: a chmod while a passthrough writer is open
	// is the known gap of killpriv.go
	fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o4777)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	*created = st.Mode & 0o7777
	_, err = syscall.Pwrite(fd, []byte("x"), 0)
	return err
}

// killprivMount mounts a live tree the way --allow-other does, so that
// another user can reach it.
func killprivMount(t *testing.T) (mnt, plain string) {
	testutil.RequireFUSE(t)
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root (to act as another user)")
	}
	f, err := New(Config{LiveDir: t.TempDir(), Passthrough: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, _ = testutil.Mount(t, f.Root(), Options(true)) // other users, checked by the kernel
	plain = t.TempDir()
	for _, d := range []string{mnt, plain, filepath.Dir(mnt), filepath.Dir(plain)} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return mnt, plain
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return os.FileMode(st.Mode & 0o7777)
}

func TestWritesDropSetuidAsOnAPlainDirectory(t *testing.T) {
	mnt, plain := killprivMount(t)
	cases := []struct {
		name   string
		nobody bool
		op     func(string) error
		// holdReader keeps a read-only descriptor open across op: the
		// inode is then in passthrough mode and the writer must be too.
		holdReader bool
	}{
		{"write by nobody", true, writeAt0, false},
		{"write by root", false, writeAt0, false},
		{"truncate by nobody", true, func(p string) error { return syscall.Truncate(p, 1) }, false},
		{"ftruncate by nobody", true, ftruncate1, false},
		{"O_TRUNC open by nobody", true, openTrunc, false},
		{"O_TRUNC open by root", false, openTrunc, false},
		{"O_TRUNC open by nobody, passthrough inode", true, openTrunc, true},
		{"write by nobody, passthrough inode", true, writeAt0, true},
		{"write by root, passthrough inode", false, writeAt0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var modes []os.FileMode
			for _, dir := range []string{plain, mnt} {
				p := filepath.Join(dir, "f"+c.name)
				if err := os.WriteFile(p, []byte("hello"), 0o777); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Chmod(p, 0o6777); err != nil {
					t.Fatal(err)
				}
				if m := modeOf(t, p); m != 0o6777 {
					t.Fatalf("chmod 6777 in %s gave %o", dir, m)
				}
				if c.holdReader {
					r, err := os.Open(p)
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
				}
				op := func() error { return c.op(p) }
				var err error
				if c.nobody {
					err = testutil.AsNobody(op)
				} else {
					err = op()
				}
				if err != nil {
					t.Fatalf("%s in %s: %v", c.name, dir, err)
				}
				modes = append(modes, modeOf(t, p))
			}
			if modes[0] != modes[1] {
				t.Fatalf("mode after %s: plain directory %o, mount %o", c.name, modes[0], modes[1])
			}
		})
	}
}

func TestCreatedSetuidFileDropsItOnWrite(t *testing.T) {
	mnt, plain := killprivMount(t)
	var modes []os.FileMode
	var created [2]uint32
	for i, dir := range []string{plain, mnt} {
		p := filepath.Join(dir, "new")
		if err := testutil.AsNobody(func() error { return createAndWrite(p, &created[i]) }); err != nil {
			t.Fatalf("create in %s: %v", dir, err)
		}
		modes = append(modes, modeOf(t, p))
	}
	if created[0] != created[1] || created[1]&0o4000 == 0 {
		t.Fatalf("mode after create with 4777: plain directory %o, mount %o", created[0], created[1])
	}
	if modes[0] != modes[1] {
		t.Fatalf("mode after create and write: plain directory %o, mount %o", modes[0], modes[1])
	}
	if modes[1]&0o4000 != 0 {
		t.Fatalf("setuid survived a write by its unprivileged owner: %o", modes[1])
	}
}

func TestWriteDropsFileCapability(t *testing.T) {
	mnt, plain := killprivMount(t)
	// VFS_CAP_REVISION_2, permitted CAP_NET_BIND_SERVICE
	capv2 := []byte{0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	for _, dir := range []string{plain, mnt} {
		p := filepath.Join(dir, "capped")
		if err := os.WriteFile(p, []byte("hello"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(p, "security.capability", capv2, 0); err != nil {
			t.Fatalf("set the capability in %s: %v", dir, err)
		}
		buf := make([]byte, 64)
		if n, err := unix.Getxattr(p, "security.capability", buf); err != nil || !bytes.Equal(buf[:n], capv2) {
			t.Fatalf("capability in %s reads %x, %v", dir, buf[:max(n, 0)], err)
		}
		if err := writeAt0(p); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Getxattr(p, "security.capability", buf); !errors.Is(err, unix.ENODATA) {
			t.Fatalf("capability in %s after a write: %v, want ENODATA", dir, err)
		}
	}
}

// TestChmodAfterWritesIsSeen checks that a file seen without setuid by
// earlier writes is looked at again after a chmod.
func TestChmodAfterWritesIsSeen(t *testing.T) {
	mnt, plain := killprivMount(t)
	var modes []os.FileMode
	for _, dir := range []string{plain, mnt} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte("hello"), 0o777); err != nil {
			t.Fatal(err)
		}
		// past the creating writer's passthrough mode (ioModeGrace), so
		// that the writes below reach the server
		time.Sleep(5 * ioModeGrace)
		fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		if _, err := syscall.Pwrite(fd, []byte("a"), 0); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, 0o4777); err != nil {
			t.Fatal(err)
		}
		if err := testutil.AsNobody(func() error { return writeAt0(p) }); err != nil {
			t.Fatal(err)
		}
		modes = append(modes, modeOf(t, p))
	}
	if modes[0] != modes[1] || modes[1] != 0o777 {
		t.Fatalf("mode after chmod 4777 and a write by nobody: plain directory %o, mount %o", modes[0], modes[1])
	}
}

// TestCreatedFileBelongsToCaller: a file created through the mount
// belongs to its creator, as in a plain directory, whether the creator
// is the server's own user (root: no chown needed) or another (chowned
// at Create), and the attributes of the create's reply say so.
func TestCreatedFileBelongsToCaller(t *testing.T) {
	mnt, plain := killprivMount(t)
	for _, who := range []string{"root", "nobody"} {
		var owners [2][2]uint32
		for i, dir := range []string{plain, mnt} {
			p := filepath.Join(dir, "by-"+who)
			create := func() error {
				fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
				if err != nil {
					return err
				}
				defer syscall.Close(fd)
				var st syscall.Stat_t
				if err := syscall.Fstat(fd, &st); err != nil {
					return err
				}
				owners[i] = [2]uint32{st.Uid, st.Gid}
				return nil
			}
			var err error
			if who == "root" {
				err = create()
			} else {
				err = testutil.AsNobody(create)
			}
			if err != nil {
				t.Fatalf("create as %s in %s: %v", who, dir, err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if got := [2]uint32{st.Uid, st.Gid}; got != owners[i] {
				t.Errorf("%s: owner %v after close, %v at create", p, got, owners[i])
			}
		}
		want := uint32(0)
		if who == "nobody" {
			want = nobody
		}
		if owners[0] != owners[1] || owners[1][0] != want {
			t.Errorf("created by %s: plain directory's owner %v, mount's %v", who, owners[0], owners[1])
		}
	}
}

// TestCapabilityOfNewFile: a file made by an exclusive create has no
// security.capability, and the mount says so without asking the live
// file (the kernel asks at its first write and at each chown: two round
// trips per file of an untar); once set through the mount, the
// capability reads back from the live file, and a file made otherwise is
// always asked.
func TestCapabilityOfNewFile(t *testing.T) {
	testutil.RequireFUSE(t)
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root (to set security.capability)")
	}
	live := t.TempDir()
	f, err := New(Config{LiveDir: live, Passthrough: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, _ := testutil.Mount(t, f.Root(), Options(false))
	capv2 := []byte{0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	buf := make([]byte, 64)
	capOf := func(p string) ([]byte, error) {
		n, err := unix.Getxattr(p, xattrCapability, buf)
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	made := filepath.Join(mnt, "made")
	fd, err := syscall.Open(made, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Write(fd, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fchown(fd, 0, 0); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	if c, err := capOf(made); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("new file's capability: %x, %v; want ENODATA", c, err)
	}
	// Behind the mount's back (never done in use): the answer comes
	// from what the mount knows, not from the live file.
	if err := unix.Setxattr(filepath.Join(live, "made"), xattrCapability, capv2, 0); err != nil {
		t.Fatal(err)
	}
	if c, err := capOf(made); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("new file's capability read from the live file: %x, %v", c, err)
	}
	if err := unix.Removexattr(filepath.Join(live, "made"), xattrCapability); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(made, xattrCapability, capv2, 0); err != nil {
		t.Fatal(err)
	}
	if c, err := capOf(made); err != nil || !bytes.Equal(c, capv2) {
		t.Fatalf("capability set through the mount reads %x, %v", c, err)
	}
	if err := unix.Removexattr(made, xattrCapability); err != nil {
		t.Fatal(err)
	}
	if c, err := capOf(made); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("capability after its removal: %x, %v; want ENODATA", c, err)
	}
	other := filepath.Join(mnt, "other") // created without O_EXCL: may have been there
	if err := os.WriteFile(other, []byte("hello"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(live, "other"), xattrCapability, capv2, 0); err != nil {
		t.Fatal(err)
	}
	if c, err := capOf(other); err != nil || !bytes.Equal(c, capv2) {
		t.Fatalf("capability of a file not made exclusively reads %x, %v; want the live file's", c, err)
	}
}
