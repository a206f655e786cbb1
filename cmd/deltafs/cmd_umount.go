package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/mount"
	"github.com/deltafs/deltafs/objstore"
	"github.com/spf13/cobra"
)

// newUmountCmd builds "deltafs umount".
func newUmountCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "umount MOUNTPOINT",
		Short: "Unmount a deltafs mount; its mount process records what is pending and exits",
		Long: `Unmount the deltafs mount at MOUNTPOINT and wait until the "deltafs
mount" process serving it has recorded every pending revision and let
the store go: when umount returns 0, the store is free for gc, repack or
another mount (a change its shutdown deadline left unrecorded is
recorded by the next mount; the mount process says so in its own
output). A busy mount (a shell inside it, an open file) is refused with
exit status 11, naming the processes that hold it. A mount whose
process was killed is detached (the next mount records what it left);
one whose process dies while umount waits for it is reported (exit 1).
A path inside a deltafs mount, or the store of one, is refused (exit 3)
with the mount point to give instead.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUmount(cmd.OutOrStdout(), args[0], umountWait)
		},
	}
}

// umountWait bounds how long umount waits for the mount process to let
// the store go: that process's own default shutdown deadline, and some.
const umountWait = mount.DefaultShutdownTimeout + 15*time.Second

// umountNotice is how long umount waits before saying what it waits for.
const umountNotice = 2 * time.Second

// runUmount unmounts the deltafs mount at mnt and waits, up to wait, for
// its mount process to finish.
func runUmount(out io.Writer, mnt string, wait time.Duration) error {
	abs, err := mountPointPath(mnt)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", mnt, mount.ErrMountPoint, err)
	}
	if !mount.IsDeltafsMount(abs) {
		switch m, isStore := mount.MountOf(abs); {
		case isStore:
			return fmt.Errorf("%w: %s is the store of the deltafs mount at %s (umount %s)", mount.ErrMountPoint, abs, m, m)
		case m != "":
			return fmt.Errorf("%w: %s is inside the deltafs mount at %s (umount %s)", mount.ErrMountPoint, abs, m, m)
		}
		return fmt.Errorf("%s: %w: not a deltafs mount", abs, mount.ErrMountPoint)
	}
	// Run from inside the mount (cd ~/work && deltafs umount ~/work),
	// this process's own working directory would keep it busy and be
	// named among its holders; the paths are absolute from here on.
	_ = os.Chdir("/")
	store := mount.MountSource(abs)
	if dead, err := mount.DetachDead(abs, store); err != nil {
		return err
	} else if dead {
		fmt.Fprintf(out, "deltafs: umount: the mount process of %s is gone; detached it (the next mount of %s records what it left)\n", abs, store)
		return nil
	}
	if err := unmount(abs); err != nil {
		return err
	}
	waitUnmounted(abs, 5*time.Second)
	return waitReleased(out, abs, store, wait)
}

// mountPointPath returns mnt absolute, symlinks resolved. A dead mount
// point (its server killed) cannot be looked at (ENOTCONN): the path is
// resolved up to it, and a symlink to it followed, by deadMountPath.
func mountPointPath(mnt string) (string, error) {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, syscall.ENOTCONN) {
		return deadMountPath(abs, 0)
	}
	return resolved, err
}

// maxLinks bounds the symlinks deadMountPath follows (the kernel's
// limit, past which it answers ELOOP).
const maxLinks = 40

// deadMountPath resolves abs, which leads to a dead mount point: its
// directory is resolved, and its last name followed while it is a
// symlink (those live outside the dead mount and can be read); the
// name it ends at is the candidate mount point, which the caller looks
// up in mountinfo. links counts the symlinks followed so far.
func deadMountPath(abs string, links int) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, filepath.Base(abs))
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return p, nil // ENOTCONN: the dead mount point itself
	}
	if links == maxLinks {
		return "", &os.PathError{Op: "resolve", Path: abs, Err: syscall.ELOOP}
	}
	target, err := os.Readlink(p)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	return deadMountPath(filepath.Clean(target), links+1)
}

// unmount unmounts the mount on mnt: umount(2) as root, fusermount3
// otherwise.
func unmount(mnt string) error {
	if os.Geteuid() == 0 {
		if err := syscall.Unmount(mnt, 0); errors.Is(err, syscall.EBUSY) {
			return busyError(mnt)
		} else if err != nil {
			return fmt.Errorf("unmount %s: %w", mnt, err)
		}
		return nil
	}
	if uid, ok := mount.MountOwner(mnt); ok && uid != uint32(os.Getuid()) {
		// fusermount3 would say the mount is not in /etc/mtab.
		return fmt.Errorf("unmount %s: mounted by user %d: %w", mnt, uid, os.ErrPermission)
	}
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		if strings.Contains(strings.ToLower(string(out)), syscall.EBUSY.Error()) {
			return busyError(mnt)
		}
		return fmt.Errorf("unmount %s: %s", mnt, strings.TrimSpace(string(out)))
	}
	return nil
}

// busyError says which processes keep the mount at mnt busy.
func busyError(mnt string) error {
	return busyMessage(mnt, mount.Holders(mnt), mountPID(mnt))
}

// busyMessage is busyError's message, given the holders of the mount at
// mnt and the pid of its own process (0 if unknown). The mount process
// itself holds the mount only while a restore writes the file it brings
// back through the mount point (deltafs restore on a mounted store):
// that holder is named as such, not as "deltafs (pid N)", which read as
// the mount refusing its own unmount.
func busyMessage(mnt string, hs []mount.Holder, self int) error {
	restoring := false
	others := hs[:0:0]
	for _, h := range mount.WithoutSelf(hs, self) {
		if self != 0 && h.PID == self {
			restoring = true
		} else {
			others = append(others, h)
		}
	}
	who := mount.DescribeHolders(others)
	switch {
	case restoring && who == "":
		return fmt.Errorf("%s: %w (a deltafs restore is writing a file in it): let the restore finish, then unmount again", mnt, mount.ErrBusy)
	case restoring:
		return fmt.Errorf("%s: %w (in use by %s, and a deltafs restore writing a file in it): close the files open in it and leave it, let the restore finish, then unmount again", mnt, mount.ErrBusy, who)
	case who == "":
		who = "a process (see 'fuser -vm " + mnt + "')"
	}
	return fmt.Errorf("%s: %w (in use by %s): close the files open in it and leave it, then unmount again", mnt, mount.ErrBusy, who)
}

// mountPID returns the pid of the process serving the mount at mnt, as
// its store's lock records it, or 0.
func mountPID(mnt string) int {
	store := mount.MountSource(mnt)
	if store == "" {
		return 0
	}
	var held *objstore.LockError
	if !errors.As(objstore.Holder(store), &held) {
		return 0
	}
	pid, _ := strconv.Atoi(held.PID)
	return pid
}

// waitUnmounted waits a little for the unmount to show.
func waitUnmounted(dir string, limit time.Duration) {
	for end := time.Now().Add(limit); mount.IsDeltafsMount(dir) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
}

// waitReleased waits up to limit for the mount process of store, which
// records what is pending after the unmount, to let the store lock go;
// after umountNotice it says on out what it waits for. A mount that
// names no store has nothing to wait for.
func waitReleased(out io.Writer, mnt, store string, limit time.Duration) error {
	start, noticed, pid := time.Now(), false, ""
	for store != "" {
		err := objstore.Holder(store)
		var held *objstore.LockError
		if errors.As(err, &held) {
			pid = held.PID
		}
		switch {
		case err == nil && pid != "" && objstore.LeftBy(store) == pid:
			return fmt.Errorf("unmounted %s, but its mount process (pid %s) died before it let %s go (see its output): the next mount records what it left", mnt, pid, store)
		case err == nil:
			return nil
		case !errors.As(err, &held):
			return fmt.Errorf("unmounted %s, but: %w", mnt, err)
		case time.Since(start) > limit:
			return fmt.Errorf("unmounted %s, but %w after %s: its mount process has not finished recording what was pending", mnt, err, limit.Round(time.Second))
		case !noticed && time.Since(start) > umountNotice:
			fmt.Fprintf(out, "deltafs: umount: unmounted %s; waiting up to %s for its mount process to record what is pending and let %s go\n",
				mnt, limit.Round(time.Second), store)
			noticed = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
