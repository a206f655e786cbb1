package fs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var time0 = time.Unix(1_000_000_000, 0)

// swapped mounts a live tree with d/f (and d/sub/), makes the kernel know
// their names, then, behind the mount's back as a user racing it would
// between a lookup and the server's call, moves d away and puts a symlink
// to an outside directory holding its own f and sub/ in its place. It
// returns the mount and the outside directory.
// The extra paths are looked up too before the swap.
func swapped(t *testing.T, extra ...string) (*mounted, string) {
	t.Helper()
	m := mountLive(t)
	if err := os.MkdirAll(m.path("d/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("d/f"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.awaitReleased(t, "d/f")
	for _, p := range append([]string{"d", "d/f", "d/sub"}, extra...) {
		if _, err := os.Lstat(m.path(p)); err != nil { // the kernel caches the names
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.MkdirAll(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("outside, not to be touched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(filepath.Join(outside, "f"), "user.secret", []byte("outside"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(m.live, "d"), filepath.Join(m.live, "d.moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(m.live, "d")); err != nil {
		t.Fatal(err)
	}
	return m, outside
}

// untouched fails unless the outside directory holds what swapped put
// there, as it was.
func untouched(t *testing.T, outside string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(outside, "f"))
	if err != nil || string(b) != "outside, not to be touched\n" {
		t.Fatalf("outside f: %q, %v", b, err)
	}
	st, err := os.Stat(filepath.Join(outside, "f"))
	if err != nil || st.Mode().Perm() != 0o644 || st.ModTime().Equal(time0) ||
		st.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
		t.Fatalf("outside f: %v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "sub")); err != nil {
		t.Fatalf("outside sub: %v", err)
	}
	es, _ := os.ReadDir(outside)
	if len(es) != 2 {
		t.Fatalf("outside holds %d entries, want f and sub", len(es))
	}
	buf := make([]byte, 64)
	if n, err := unix.Lgetxattr(filepath.Join(outside, "f"), "user.secret", buf); err != nil || string(buf[:n]) != "outside" {
		t.Fatalf("outside f's xattr: %q, %v", buf[:max(n, 0)], err)
	}
	if n, _ := unix.Lgetxattr(filepath.Join(outside, "f"), "user.new", buf); n > 0 {
		t.Fatal("outside f got an xattr")
	}
	if st.Sys().(*syscall.Stat_t).Nlink != 1 {
		t.Fatal("outside f got a hard link")
	}
}

// TestChangesDoNotFollowASwappedSymlink: every change the server makes
// to the live tree goes through descriptors opened with no symlink on
// the way, so a symlink swapped in for a directory the kernel knows makes
// the change fail, never land outside the tree. By path (go-fuse's
// loopback), each of these changed the outside directory: a review
// truncated a root-owned file so from an unprivileged account.
func TestChangesDoNotFollowASwappedSymlink(t *testing.T) {
	ops := []struct {
		name string
		op   func(m *mounted) error
	}{
		{"truncate", func(m *mounted) error { return os.Truncate(m.path("d/f"), 0) }},
		{"chmod", func(m *mounted) error { return os.Chmod(m.path("d/f"), 0o666) }},
		{"chown", func(m *mounted) error { return os.Lchown(m.path("d/f"), 1, 1) }},
		{"utimes", func(m *mounted) error { return os.Chtimes(m.path("d/f"), time0, time0) }},
		{"open O_RDONLY|O_TRUNC", func(m *mounted) error {
			fd, err := syscall.Open(m.path("d/f"), syscall.O_RDONLY|syscall.O_TRUNC, 0)
			if err == nil {
				syscall.Close(fd)
			}
			return err
		}},
		{"unlink", func(m *mounted) error { return os.Remove(m.path("d/f")) }},
		{"rmdir", func(m *mounted) error { return syscall.Rmdir(m.path("d/sub")) }},
		{"rename", func(m *mounted) error { return os.Rename(m.path("d/f"), m.path("d/g")) }},
		{"mkdir", func(m *mounted) error { return os.Mkdir(m.path("d/sub/new"), 0o755) }},
		{"mknod", func(m *mounted) error { return syscall.Mknod(m.path("d/sub/fifo"), syscall.S_IFIFO|0o644, 0) }},
		{"symlink", func(m *mounted) error { return os.Symlink("x", m.path("d/sub/link")) }},
		{"setxattr", func(m *mounted) error { return unix.Lsetxattr(m.path("d/f"), "user.new", []byte("v"), 0) }},
		{"removexattr", func(m *mounted) error { return unix.Lremovexattr(m.path("d/f"), "user.secret") }},
		{"getxattr", func(m *mounted) error {
			buf := make([]byte, 64)
			if n, err := unix.Lgetxattr(m.path("d/f"), "user.secret", buf); err == nil && string(buf[:n]) == "outside" {
				return errors.New("read the outside file's xattr")
			}
			return nil
		}},
		{"listxattr", func(m *mounted) error {
			buf := make([]byte, 256)
			if n, err := unix.Llistxattr(m.path("d/f"), buf); err == nil && strings.Contains(string(buf[:n]), "user.secret") {
				return errors.New("listed the outside file's xattrs")
			}
			return nil
		}},
		{"link from", func(m *mounted) error { return os.Link(m.path("d/f"), m.path("lnk")) }},
		{"link into", func(m *mounted) error {
			if err := os.WriteFile(m.path("x"), []byte("x"), 0o644); err != nil {
				return err
			}
			return os.Link(m.path("x"), m.path("d/sub/lnk"))
		}},
	}
	for _, tc := range ops {
		t.Run(tc.name, func(t *testing.T) {
			m, outside := swapped(t)
			err := tc.op(m)
			if err != nil && strings.HasPrefix(err.Error(), "read the") || err != nil && strings.HasPrefix(err.Error(), "listed") {
				t.Fatal(err)
			}
			untouched(t, outside)
			if err == nil {
				// Fine only if it changed the tree's own d (as moved).
				t.Logf("%s succeeded inside the tree", tc.name)
			}
			if _, err := os.Stat(filepath.Join(outside, "sub", "new")); err == nil {
				t.Fatal("mkdir made a directory outside the tree")
			}
			for _, n := range []string{"fifo", "link", "lnk"} {
				if _, err := os.Lstat(filepath.Join(outside, "sub", n)); err == nil {
					t.Fatalf("%s made outside the tree", n)
				}
			}
		})
	}
}

// TestListingsDoNotFollowASwappedSymlink: a directory the kernel knows,
// swapped for a symlink behind the mount, lists nothing of the
// directory it leads to, through the live tree or its .history mirror
// (by path, both listed the names of a directory outside the tree).
func TestListingsDoNotFollowASwappedSymlink(t *testing.T) {
	m, outside := swapped(t, ".history/d")
	if err := os.WriteFile(filepath.Join(outside, "secret-name"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{m.path("d"), m.path(".history/d")} {
		f, err := os.Open(dir)
		if err != nil {
			continue // refused: fine
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range names {
			if n == "secret-name" {
				t.Errorf("%s lists the outside directory's %s", dir, n)
			}
		}
	}
}
