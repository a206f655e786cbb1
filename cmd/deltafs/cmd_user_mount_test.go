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
// 8.
func TestUserMount(t *testing.T) {
	u := startUserMount(t)
	u.run("sh", "-c", `cd "$1" && printf 'read-only\n' > src && chmod 444 src && cp src copy && printf 'plain\n' > plain`, "sh", u.mnt)
	for name, mode := range map[string]os.FileMode{"copy": 0o444, "src": 0o444, "plain": 0o644} {
		fi, err := os.Stat(filepath.Join(u.store, "live", name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s in the live directory: %v %v, want %v", name, fi.Mode(), err, mode)
		}
	}
	for _, name := range []string{"copy", "src", "plain"} {
		if out := u.run(u.bin, "log", filepath.Join(u.mnt, name)); !strings.HasPrefix(out, "0\t") {
			t.Errorf("log %s: %q, want its first revision", name, out)
		}
	}
	u.run(u.bin, "umount", u.mnt)
	u.p.Cmd.Wait()
	if out := u.run(u.bin, "verify", u.store); !strings.Contains(out, "verified") {
		t.Errorf("verify: %q", out)
	}
}

// TestUserMountBusyShutdown: SIGINT to a user's mount with a file open
// for writing in it detaches the mount and waits for the file, as root's
// mount does. The mount detached with umount2(2), which only root may
// call: it exited 7 at once, leaving a dead mount point, and the
// writer's next write failed with EIO (a user review).
func TestUserMountBusyShutdown(t *testing.T) {
	u := startUserMount(t)
	fifo := filepath.Join(u.home, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(fifo, testutil.Nobody, testutil.Nobody); err != nil {
		t.Fatal(err)
	}
	writer := u.nobody(exec.Command("sh", "-c", `cd "$1" && exec 3>held.txt && echo first >&3 && read x < "$2" && echo second >&3`, "sh", u.mnt, fifo))
	var wout strings.Builder
	writer.Stdout, writer.Stderr = &wout, &wout
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(u.store, "live", "held.txt")
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(live); string(b) == "first\n" {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the writer wrote nothing")
		}
	}
	if err := u.p.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	want := "deltafs: mount: waiting up to 1m0s for 1 open file in " + u.mnt + " to be closed"
	for end := time.Now().Add(20 * time.Second); !strings.Contains(u.p.Stderr.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) || u.p.Cmd.ProcessState != nil {
			t.Fatalf("no %q on stderr: %q", want, u.p.Stderr.String())
		}
	}
	if err := os.WriteFile(fifo, []byte("\n"), 0); err != nil { // let the writer go on
		t.Fatal(err)
	}
	if err := writer.Wait(); err != nil {
		t.Fatalf("the writer after the detach: %v: %s", err, wout.String())
	}
	if err := u.p.Cmd.Wait(); err != nil {
		t.Fatalf("mount: %v; stderr %q", err, u.p.Stderr.String())
	}
	if testutil.Mounted(u.mnt) {
		t.Fatalf("%s is still mounted", u.mnt)
	}
	if out := u.run(u.bin, "cat", "--store", u.store, "held.txt"); out != "first\nsecond\n" {
		t.Errorf("cat of the held file after the shutdown: %q", out)
	}
}

// TestUserMountSetgidDirectory: a directory made in a setgid directory
// of a user's mount gets the mode its maker asked for under its own
// umask, as in a plain directory. The server put back what its own
// umask took from every new node but such a directory (its setgid bit,
// which a chmod by a user outside the group drops), even when the
// server was in the group: under umask 002, mkdir gave 2755, not 2775
// (a user review).
func TestUserMountSetgidDirectory(t *testing.T) {
	u := startUserMount(t)
	plain := filepath.Join(u.home, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(plain, testutil.Nobody, testutil.Nobody); err != nil {
		t.Fatal(err)
	}
	script := `cd "$1" && umask 002 && mkdir -m 2775 sg && mkdir sg/sub && touch sg/file && stat -c '%a %n' sg sg/sub sg/file`
	want := u.run("sh", "-c", script, "sh", plain)
	if got := u.run("sh", "-c", script, "sh", u.mnt); got != want {
		t.Errorf("modes in the mount:\n%s\nin a plain directory:\n%s", got, want)
	}
}

// TestUserMountRestoreRefused: restore over a file its user made
// read-only is permission denied, exit 7 as the README's table says: the
// mount's answer lost its kind on the control socket, exit 1 (a user
// review).
func TestUserMountRestoreRefused(t *testing.T) {
	u := startUserMount(t)
	u.run("sh", "-c", `cd "$1" && echo one > f && echo two > f && chmod 444 f`, "sh", u.mnt)
	r := runAsNobody(u.bin, "restore", filepath.Join(u.mnt, "f"), "--rev", "0")
	requireOneErrorLine(t, r, exitPermission, "permission denied")
	if out := u.run("cat", filepath.Join(u.mnt, "f")); out != "two\n" {
		t.Errorf("f after the refused restore: %q", out)
	}
}

// userMount is a store that nobody mounted (see startUserMount).
type userMount struct {
	t                     *testing.T
	bin, home, store, mnt string
	p                     *testutil.Proc
}

// startUserMount mounts a new store as nobody on a mount point nobody
// owns, in a home of nobody's, with a copy of the binary nobody can run.
// It fails the test (skips without CI) where nobody cannot mount.
// (fusermount3 opens /dev/fuse as the user: where the device is 0600,
// as on this project's machines, it lets nobody in by an ACL entry,
// removed at the test's end.)
func startUserMount(t *testing.T) *userMount {
	t.Helper()
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
	u := &userMount{t: t, bin: binaryForNobody(t, dir), home: filepath.Join(dir, "home")}
	u.store, u.mnt = filepath.Join(u.home, "work.dfs"), filepath.Join(u.home, "work")
	if err := os.MkdirAll(u.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{u.home, u.mnt} {
		if err := os.Chown(p, testutil.Nobody, testutil.Nobody); err != nil {
			t.Fatal(err)
		}
	}
	u.p = testutil.StartReady(t, u.nobody(exec.Command(u.bin, "mount", u.store, u.mnt)), 30*time.Second, syscall.SIGTERM, func(l string) bool {
		return strings.HasPrefix(l, "deltafs: mounted ")
	})
	t.Cleanup(func() { exec.Command("umount", "-l", u.mnt).Run() })
	return u
}

// nobody makes cmd run as nobody, with nobody's HOME.
func (u *userMount) nobody(cmd *exec.Cmd) *exec.Cmd {
	cmd.Env = append(os.Environ(), "HOME="+u.home)
	return asNobody(cmd)
}

// run runs args as nobody and returns the output, failing the test if
// the command fails.
func (u *userMount) run(args ...string) string {
	u.t.Helper()
	out, err := u.nobody(exec.Command(args[0], args[1:]...)).CombinedOutput()
	if err != nil {
		u.t.Fatalf("%v as nobody: %v\n%s", args, err, out)
	}
	return string(out)
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
