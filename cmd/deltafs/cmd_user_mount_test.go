package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestUserMount: a user who is not root mounts a store of their own
// (through fusermount3) and works in it. A file the user made read-only
// at its creation (cp of a 0444 file, as git's objects and tar's
// read-only files are made) went unrecorded: the server, running as the
// user, could not set its FileID (a user.* xattr the live file system
// lets only a writer set); log said it had no history and verify exited
// 8. (fusermount3 opens /dev/fuse as the user: where the device is 0600,
// as on this project's machines, the test lets nobody in by an ACL
// entry, removed at its end.)
func TestUserMount(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root to run the binary as nobody")
	}
	testutil.RequireFUSE(t)
	if _, err := exec.LookPath("fusermount3"); err != nil {
		testutil.SkipOrFail(t, "no fusermount3 (Debian package fuse3)")
	}
	if err := syscall.Access("/dev/fuse", 6); err != nil || !nobodyMayOpen("/dev/fuse") {
		extended, _ := exec.Command("getfacl", "--skip-base", "/dev/fuse").Output()
		if out, err := exec.Command("setfacl", "-m", "u:nobody:rw", "/dev/fuse").CombinedOutput(); err != nil {
			testutil.SkipOrFail(t, "cannot let nobody open /dev/fuse: %s", strings.TrimSpace(string(out)))
		}
		t.Cleanup(func() {
			if len(extended) == 0 {
				exec.Command("setfacl", "-b", "/dev/fuse").Run() // as it was: no ACL
			} else {
				exec.Command("setfacl", "-x", "u:nobody", "/dev/fuse").Run()
			}
		})
	}
	dir := t.TempDir()
	bin := binaryForNobody(t, dir) // nobody may reach its own directories
	home := filepath.Join(dir, "home")
	store, mnt := filepath.Join(home, "work.dfs"), filepath.Join(home, "work")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, mnt} {
		if err := os.Chown(p, testutil.Nobody, testutil.Nobody); err != nil {
			t.Fatal(err)
		}
	}
	nobody := func(cmd *exec.Cmd) *exec.Cmd { // with its HOME
		cmd.Env = append(os.Environ(), "HOME="+home)
		return asNobody(cmd)
	}
	p := testutil.StartReady(t, nobody(exec.Command(bin, "mount", store, mnt)), 30*time.Second, syscall.SIGTERM, func(l string) bool {
		return strings.HasPrefix(l, "deltafs: mounted ")
	})
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	run := func(args ...string) string {
		t.Helper()
		out, err := nobody(exec.Command(args[0], args[1:]...)).CombinedOutput()
		if err != nil {
			t.Fatalf("%v as nobody: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("sh", "-c", `cd "$1" && printf 'read-only\n' > src && chmod 444 src && cp src copy && printf 'plain\n' > plain`, "sh", mnt)
	for name, mode := range map[string]os.FileMode{"copy": 0o444, "src": 0o444, "plain": 0o644} {
		fi, err := os.Stat(filepath.Join(store, "live", name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s in the live directory: %v %v, want %v", name, fi.Mode(), err, mode)
		}
	}
	for _, name := range []string{"copy", "src", "plain"} {
		if out := run(bin, "log", filepath.Join(mnt, name)); !strings.HasPrefix(out, "0\t") {
			t.Errorf("log %s: %q, want its first revision", name, out)
		}
	}
	run(bin, "umount", mnt)
	p.Cmd.Wait()
	if out := run(bin, "verify", store); !strings.Contains(out, "verified") {
		t.Errorf("verify: %q", out)
	}
}

// nobodyMayOpen reports whether nobody may open the device at p for
// reading and writing.
func nobodyMayOpen(p string) bool {
	return testutil.AsNobody(func() error {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err == nil {
			f.Close()
		}
		return err
	}) == nil
}
