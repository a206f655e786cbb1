package fs_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// In a setgid directory a new file, directory, symlink or node takes the
// directory's group (and a new directory its setgid bit), through the
// mount as in a plain directory.
func TestSetgidDirectoryGroupIsInherited(t *testing.T) {
	m := mountLive(t)
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root (to give a directory another group)")
	}
	const group = 4321
	make := func(root string) map[string]syscall.Stat_t {
		t.Helper()
		d := filepath.Join(root, "d")
		if err := os.Mkdir(d, 0o775); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 0, group); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(d, 0o2775); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("f", filepath.Join(d, "l")); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(d, "p"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := map[string]syscall.Stat_t{}
		for _, n := range []string{"f", "sub", "l", "p"} {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(d, n), &st); err != nil {
				t.Fatal(err)
			}
			out[n] = st
		}
		return out
	}
	plain, mounted := make(t.TempDir()), make(m.mnt)
	for n, want := range plain {
		got := mounted[n]
		if want.Gid != group {
			t.Fatalf("%s in a plain setgid directory has group %d, want %d", n, want.Gid, group)
		}
		if got.Gid != want.Gid || got.Uid != want.Uid || got.Mode != want.Mode {
			t.Errorf("%s: uid %d gid %d mode %o through the mount, want %d %d %o as in a plain directory",
				n, got.Uid, got.Gid, got.Mode, want.Uid, want.Gid, want.Mode)
		}
	}
}
