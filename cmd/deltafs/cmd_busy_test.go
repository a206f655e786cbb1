package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/mount"
)

// TestUmountBusy: umount of a mount with a file open in it fails with
// one line naming the process (this test) and exit 11; it succeeds once
// the file is closed.
func TestUmountBusy(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	f, err := os.Create(filepath.Join(mnt, "open.txt"))
	if err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, nil, "umount", mnt)
	requireOneErrorLine(t, r, exitBusy, "mount is busy")
	if !strings.Contains(r.stderr, fmt.Sprintf("(pid %d)", os.Getpid())) {
		t.Errorf("umount does not name the process holding the mount: %q", r.stderr)
	}
	f.Close()
	if r := runBinary(t, nil, "umount", mnt); r.code != 0 || r.stderr != "" {
		t.Fatalf("umount after close: exit %d, stderr %q", r.code, r.stderr)
	}
	p.wait(t)
}

// TestShutdownBusySecondSignal: SIGINT with a file open for writing in
// the mount prints at once one line saying what the shutdown waits for;
// a second SIGINT stops the wait, with one more line; the change the
// open file holds is recorded by the next mount.
func TestShutdownBusySecondSignal(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt) // the default timeout: 60s
	f, err := os.Create(filepath.Join(mnt, "held.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("held\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("deltafs: mount: waiting up to 1m0s for 1 open file in %s to be closed, held by ", mnt)
	waitStderr(t, p, want)
	if err := p.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = p.Cmd.Wait()
	lines := strings.Split(strings.TrimSuffix(p.Stderr.String(), "\n"), "\n")
	if exitStatus(err) != exitFailure || len(lines) != 2 || !strings.HasPrefix(lines[1], "deltafs: mount: stopped waiting for "+mnt) {
		t.Fatalf("exit %v, stderr %q", err, p.Stderr.String())
	}
	f.Close()
	startMount(t, store, mnt)
	if r := runBinary(t, nil, "cat", filepath.Join(mnt, "held.txt")); r.code != 0 || r.stdout != "held\n" {
		t.Fatalf("cat after remount: %+v", r)
	}
}

// TestShutdownDeadlineOneError: the shutdown deadline passing while a
// file is open gives the waiting line and one error line, not the
// deadline twice run together.
func TestShutdownDeadlineOneError(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt, "--shutdown-timeout", "1s")
	f, err := os.OpenFile(filepath.Join(mnt, "held.txt"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = p.Cmd.Wait()
	want := fmt.Sprintf("deltafs: mount: waiting up to 1s for 1 open file in %s to be closed, held by ", mnt)
	lines := strings.Split(strings.TrimSuffix(p.Stderr.String(), "\n"), "\n")
	if exitStatus(err) != exitFailure || len(lines) != 2 || !strings.HasPrefix(lines[0], want) ||
		!strings.Contains(lines[0], fmt.Sprintf("(pid %d)", os.Getpid())) ||
		lines[1] != fmt.Sprintf("deltafs: mount: shutdown deadline exceeded: %s was still in use after 1s (changes not recorded yet are recorded by the next mount)", mnt) {
		t.Fatalf("exit %v, stderr %q", err, p.Stderr.String())
	}
}

// waitStderr waits until the mount process wrote want on stderr, while it
// still runs.
func waitStderr(t *testing.T, p *mountProc, want string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !strings.Contains(p.Stderr.String(), want); {
		if time.Now().After(end) {
			t.Fatalf("no %q on stderr: %q", want, p.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUmountFromInsideTheMount: umount run with its working directory in
// the mount does not keep the mount busy itself (it named itself among
// the holders and refused, exit 11; a review).
func TestUmountFromInsideTheMount(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	cmd := exec.Command(binary, "umount", mnt)
	cmd.Dir = mnt
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("umount from inside: %v: %s", err, out)
	}
	p.wait(t)
}

// TestUmountBusyWithARestore: the mount's own process among the holders
// (a restore writing the file it brings back through the mount point)
// is named as a restore, not as "deltafs (pid N)", which read as the
// mount refusing its own unmount; mountPID finds that process through
// the store's lock.
func TestUmountBusyWithARestore(t *testing.T) {
	store, mnt := newMountDirs(t)
	p := startMount(t, store, mnt)
	self := p.Cmd.Process.Pid
	if got := mountPID(mnt); got != self {
		t.Fatalf("mountPID: %d, want the mount's %d", got, self)
	}
	own := mount.Holder{PID: self, Name: "deltafs", Files: 1}
	vim := mount.Holder{PID: 4242, Name: "vim", Files: 1}
	for _, c := range []struct {
		hs        []mount.Holder
		want, not string
	}{
		{[]mount.Holder{own}, "(a deltafs restore is writing a file in it): let the restore finish", "pid"},
		{[]mount.Holder{own, vim}, "(in use by vim (pid 4242), and a deltafs restore writing a file in it)", fmt.Sprintf("pid %d", self)},
		{[]mount.Holder{vim}, "(in use by vim (pid 4242)): close the files", "restore"},
		{nil, "(in use by a process (see 'fuser -vm " + mnt + "'))", "restore"},
		// The mount process with no file open there (started in the
		// directory now under the mount): not a holder at all.
		{[]mount.Holder{{PID: self, Name: "deltafs"}, vim}, "(in use by vim (pid 4242)): close the files", "deltafs"},
	} {
		err := busyMessage(mnt, c.hs, self)
		if !errors.Is(err, mount.ErrBusy) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("holders %v: %q; want it to say %q and not %q", c.hs, err, c.want, c.not)
		}
	}
	p.stop(t, syscall.SIGTERM)
}
