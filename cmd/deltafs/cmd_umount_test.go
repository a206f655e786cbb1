package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestUmountWaitsForRecording: when umount returns 0 the mount process
// has recorded the file just closed and let the store go, so that the
// next command on the unmounted store (the README's umount-then-gc)
// does not find it locked.
func TestUmountWaitsForRecording(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	writeFile(t, mnt, "p.bin", testutil.Bytes(4, 30_000_000))
	r := runBinary(t, nil, "umount", mnt)
	if r.code != 0 || r.stderr != "" || r.stdout != "" && !strings.Contains(r.stdout, "waiting up to") {
		t.Fatalf("umount: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runBinary(t, nil, "log", "--store", store, "p.bin"); r.code != 0 || !strings.HasPrefix(r.stdout, "0\t") {
		t.Fatalf("log right after umount: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	p.wait(t)
}

// TestUmountPastShutdownDeadline: a mount process whose shutdown
// deadline passes before it has recorded what was pending fails (umount
// itself returns once the store is free); the next mount records it.
// The file is new, so its recording waits out a grace (200 ms) that the
// umount arrives within; then 60 MB of random bytes cannot be stored in
// the 1 ms deadline (with 50 ms, a quiet machine's direct writes
// sometimes made it, and the mount exited 0).
func TestUmountPastShutdownDeadline(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt, "--shutdown-timeout", "1ms")
	data := testutil.Bytes(5, 60_000_000)
	writeFile(t, mnt, "p.bin", data)
	if r := runBinary(t, nil, "umount", mnt); r.code != 0 {
		t.Fatalf("umount: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	if err := p.Cmd.Wait(); err == nil {
		t.Fatalf("mount process exited 0 past its shutdown deadline; stderr %q", p.Stderr.String())
	}
	p = startMount(t, store, mnt)
	if r := runBinary(t, nil, "umount", mnt); r.code != 0 {
		t.Fatalf("second umount: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	p.wait(t)
	r := runBinary(t, nil, "cat", "--store", store, "p.bin")
	if r.code != 0 || !bytes.Equal([]byte(r.stdout), data) {
		t.Fatalf("cat after the next mount: exit %d, %d bytes, %q", r.code, len(r.stdout), r.stderr)
	}
}

// TestUmountAfterFsyncedNewFile: a new file written, fsynced and closed
// (an editor's save) is recorded, and umount exits 0 and silent (it
// used to read the pending journal, which still named the file, and
// failed with "leaving 1 changed file unrecorded").
func TestUmountAfterFsyncedNewFile(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	f, err := os.OpenFile(filepath.Join(mnt, "saved"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	if r := runBinary(t, nil, "umount", mnt); r.code != 0 || r.stderr != "" {
		t.Fatalf("umount: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	p.wait(t)
	if r := runBinary(t, nil, "cat", "--store", store, "saved"); r.code != 0 || r.stdout != "hello\n" {
		t.Fatalf("cat after umount: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
}

// TestUmountDeadMount: umount of a mount whose process was killed
// detaches it, says so in one line and exits 0; the next mount works.
// (Here the kernel still answers lstat of the dead mount point from its
// cache, and the store's free lock tells the mount dead; for the
// ENOTCONN a mount point answers when nothing is cached, see
// TestUmountNotConnected.)
func TestUmountDeadMount(t *testing.T) {
	store, mnt := newMountDirs(t)
	killMount(t, store, mnt)
	r := runBinary(t, nil, "umount", mnt)
	if r.code != 0 || r.stderr != "" || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, "is gone; detached it") {
		t.Fatalf("umount of a dead mount: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if testutil.Mounted(mnt) {
		t.Fatalf("%s still mounted", mnt)
	}
	p := startMount(t, store, mnt)
	if b, err := os.ReadFile(filepath.Join(mnt, "x.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("after the dead mount's umount: %q, %v", b, err)
	}
	p.stop(t, syscall.SIGTERM)
}

// TestUmountNotConnected: umount of a mount whose process was killed
// right after a file was made in its root, which makes the kernel's
// attributes of the root stale: its mount point then answers ENOTCONN
// (as any dead mount does once the kernel's cached attributes expire),
// named directly or through a symlink, detaches it, says so in one line
// and exits 0. (Killing it before anything looked at the mount point no
// longer leaves it so: the kernel's permission checks, on every mount,
// fetched the root's attributes at the first path walk through it.)
func TestUmountNotConnected(t *testing.T) {
	for _, viaLink := range []bool{false, true} {
		store, mnt := newMountDirs(t)
		p := startMount(t, store, mnt)
		t.Cleanup(func() {
			if testutil.Mounted(mnt) { // a failed umount: no dead mount left in TempDir
				syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
		})
		if err := os.WriteFile(filepath.Join(mnt, "new"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := p.Cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		p.Cmd.Wait()
		if _, err := os.Stat(mnt); !errors.Is(err, syscall.ENOTCONN) {
			t.Fatalf("stat of the killed mount's mount point: %v, want ENOTCONN", err)
		}
		arg := mnt
		if viaLink {
			arg = filepath.Join(filepath.Dir(mnt), "link")
			if err := os.Symlink(filepath.Base(mnt), arg); err != nil {
				t.Fatal(err)
			}
		}
		r := runBinary(t, nil, "umount", arg)
		if r.code != 0 || r.stderr != "" || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, mnt+" is gone; detached it") {
			t.Fatalf("umount %s (symlink %v): exit %d, stdout %q, stderr %q", arg, viaLink, r.code, r.stdout, r.stderr)
		}
		if testutil.Mounted(mnt) {
			t.Fatalf("%s still mounted", mnt)
		}
	}
}

// TestUmountMountDiesMeanwhile: a mount process that dies while umount
// waits for it to record what is pending (a crash on a full disk did)
// lets the store lock go with its death; umount says so and fails rather
// than returning 0 and silent. The holder here is a child process that
// inherited the lock, killed while waitReleased waits.
func TestUmountMountDiesMeanwhile(t *testing.T) {
	store := t.TempDir()
	f, err := os.OpenFile(filepath.Join(store, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "60")
	holder.ExtraFiles = []*os.File{f} // the child holds the lock too
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	if _, err := f.WriteAt(fmt.Appendf(nil, "pid %d\nholder mounted on /x\n", holder.Process.Pid), 0); err != nil {
		t.Fatal(err)
	}
	f.Close() // the child's copy keeps it
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() { done <- waitReleased(&out, "/x", store, time.Minute) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("waitReleased returned while the lock was held: %v", err)
	default:
	}
	holder.Process.Kill()
	holder.Wait()
	err = <-done
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("its mount process (pid %d) died before it let", holder.Process.Pid)) {
		t.Fatalf("waitReleased after the holder died: %v", err)
	}
	// a holder that lets go cleanly empties the lock file: no complaint
	if err := os.WriteFile(filepath.Join(store, "LOCK"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := waitReleased(&out, "/x", store, time.Minute); err != nil {
		t.Fatalf("waitReleased with the lock let go: %v", err)
	}
}

// TestUmountNotTheMountPoint: umount of a path inside a deltafs mount (a
// file, .snapshots, a directory, given relative too) or of the store of
// one says what the path is and names the mount to unmount, exit 3,
// and unmounts nothing; a path near no deltafs mount is still "not a
// deltafs mount".
func TestUmountNotTheMountPoint(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	writeFile(t, mkdir(t, mnt, "sub"), "somefile", []byte("x\n"))
	inside := " is inside the deltafs mount at " + mnt + " (umount " + mnt + ")"
	rel, err := filepath.Rel(mustGetwd(t), filepath.Join(mnt, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir()
	for _, c := range []struct{ arg, want string }{
		{filepath.Join(mnt, "sub", "somefile"), filepath.Join(mnt, "sub", "somefile") + inside},
		{filepath.Join(mnt, "sub") + "/", filepath.Join(mnt, "sub") + inside},
		{rel, filepath.Join(mnt, "sub") + inside},
		{filepath.Join(mnt, ".snapshots"), filepath.Join(mnt, ".snapshots") + inside},
		{store, store + " is the store of the deltafs mount at " + mnt + " (umount " + mnt + ")"},
		{plain, plain + ": unusable mount point: not a deltafs mount"},
	} {
		r := runBinary(t, nil, "umount", c.arg)
		if r.code != exitMountPoint || r.stdout != "" || !strings.HasSuffix(r.stderr, c.want+"\n") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("umount %s: exit %d, stdout %q, stderr %q; want exit %d and %q", c.arg, r.code, r.stdout, r.stderr, exitMountPoint, c.want)
		}
		if !testutil.Mounted(mnt) {
			t.Fatalf("umount %s unmounted %s", c.arg, mnt)
		}
	}
	p.stop(t, syscall.SIGTERM)
}

// TestUmountStoreOfUnseenMount: the store of a mount this process cannot
// see in its mountinfo (another mount namespace) is named by its lock:
// the mount point its holder wrote.
func TestUmountStoreOfUnseenMount(t *testing.T) {
	store := t.TempDir()
	if err := os.WriteFile(filepath.Join(store, "FORMAT"), []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(store, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("pid 4242\nholder mounted on /elsewhere/work\n"); err != nil {
		t.Fatal(err)
	}
	err = runUmount(io.Discard, store, time.Second)
	want := "unusable mount point: " + store + " is the store of the deltafs mount at /elsewhere/work (umount /elsewhere/work)"
	if err == nil || err.Error() != want || exitCode(err) != exitMountPoint {
		t.Fatalf("umount of a store locked by an unseen mount: %v, want %q (exit %d)", err, want, exitMountPoint)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
