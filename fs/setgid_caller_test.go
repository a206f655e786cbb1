package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestCallerFileTakesSetgidGroup: a file another user creates through
// the mount (the server runs as root and chowns it to its caller) keeps
// the group of a setgid parent directory, also when that group is the
// server's own, and takes the caller's group in a plain directory of the
// server's group, as in a plain directory outside the mount.
func TestCallerFileTakesSetgidGroup(t *testing.T) {
	mnt, plain := killprivMount(t)
	dirs := []struct {
		name string
		gid  int
		mode uint32
	}{
		{"setgid-server-group", os.Getegid(), 0o2777},
		{"setgid-other-group", 4321, 0o2777},
		{"plain-server-group", os.Getegid(), 0o777},
	}
	gidOf := func(root, dir string) (uint32, error) {
		p := filepath.Join(root, dir, "f")
		if err := testutil.AsNobody(func() error {
			fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
			if err != nil {
				return err
			}
			return syscall.Close(fd)
		}); err != nil {
			return 0, fmt.Errorf("create %s as nobody: %w", p, err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return 0, err
		}
		if st.Uid != nobody {
			return 0, fmt.Errorf("%s belongs to %d, want nobody (%d)", p, st.Uid, nobody)
		}
		return st.Gid, nil
	}
	for _, d := range dirs {
		for _, root := range []string{plain, mnt} {
			p := filepath.Join(root, d.name)
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, 0, d.gid); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Chmod(p, d.mode); err != nil {
				t.Fatal(err)
			}
		}
		want, err := gidOf(plain, d.name)
		if err != nil {
			t.Fatal(err)
		}
		if setgid := d.mode&syscall.S_ISGID != 0; setgid && want != uint32(d.gid) || !setgid && want != nobody {
			t.Fatalf("%s: nobody's new file in a plain directory has group %d", d.name, want)
		}
		got, err := gidOf(mnt, d.name)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: nobody's new file has group %d through the mount, %d in a plain directory", d.name, got, want)
		}
	}
}
