package fs

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestServerUmaskMasksNothing: the kernel applies the creating process's
// umask before it asks the mount to create a file, a directory or a
// fifo; the server's own umask, applied again by its syscalls on the
// live directory, took more bits away: with the mount started under
// umask 077, a process with umask 002 made 0600 files instead of 0664.
// The modes a new node gets are the caller's alone.
func TestServerUmaskMasksNothing(t *testing.T) {
	testutil.RequireFUSE(t)
	old := syscall.Umask(0o077) // the server's (this process's)
	t.Cleanup(func() { syscall.Umask(old) })
	f, err := New(Config{LiveDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, _ := testutil.Mount(t, f.Root(), Options(false))
	// cd in the shell: a child of this process (which serves the mount)
	// must not chdir into the mount before its exec (vfork).
	cmd := exec.Command("sh", "-c", `cd "$1" && umask 002 && touch f && mkdir d && mkfifo p && : > d/g`, "sh", mnt)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, want := range map[string]os.FileMode{"f": 0o664, "d": 0o775, "p": 0o664, "d/g": 0o664} {
		for _, dir := range []string{mnt, f.live} {
			fi, err := os.Lstat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("%s in %s: mode %v, want %v (umask 002 of the caller)", name, dir, got, want)
			}
		}
	}
}
