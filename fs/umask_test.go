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
	f, mnt := mountUnderUmask077(t)
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

// TestCreateOfAFileThatAppearedKeepsItsMode: the kernel asks to create a
// name it takes for missing (a negative entry it keeps), and a file may
// be there by then (made in the live directory behind the mount): it is
// opened as it is, its mode and owner untouched, as open(O_CREAT) of an
// existing file does, not given the mode of the create.
func TestCreateOfAFileThatAppearedKeepsItsMode(t *testing.T) {
	f, mnt := mountUnderUmask077(t)
	p := filepath.Join(mnt, "late")
	if _, err := os.Lstat(p); !os.IsNotExist(err) { // the kernel keeps the miss
		t.Fatalf("lstat before: %v", err)
	}
	if err := os.WriteFile(filepath.Join(f.live, "late"), []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(f.live, "late"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `umask 002 && printf new >> "$1"`, "sh", p)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	fi, err := os.Lstat(filepath.Join(f.live, "late"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the file that appeared: mode %v after the create, want -rw------- as it was", fi.Mode())
	}
	if b, err := os.ReadFile(filepath.Join(f.live, "late")); err != nil || string(b) != "kept\nnew" {
		t.Errorf("its content: %q %v, want the old content and the append", b, err)
	}
}

// mountUnderUmask077 mounts a plain live tree (mountPlain) served by
// this process under umask 077 until the test ends: the server's umask
// (the test's shell commands set their own).
func mountUnderUmask077(t *testing.T) (*FS, string) {
	t.Helper()
	testutil.RequireFUSE(t)
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	return mountPlain(t, false)
}
