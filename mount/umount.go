package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// What "deltafs umount" needs besides unmount(2): the store behind a
// mount point and a dead mount's detach. (It does not read the pending
// journal to tell whether the mount left changes unrecorded: the journal
// is a superset, safe for the next mount's redo, and what a passed
// shutdown deadline left in it is the next mount's to record, not an
// error of this one.)

// MountSource returns the store of the deltafs mount on dir (its source
// in /proc/self/mountinfo), or "" if dir is no deltafs mount point. It
// does not touch dir, which may be a dead mount.
func MountSource(dir string) string {
	store := ""
	for _, m := range mounts(fsType) {
		if m.point == dir {
			store = m.source // the last mounted, which hides the others
		}
	}
	return store
}

// mountedOn starts the holder a mount writes into its store's lock,
// followed by the mount point.
const mountedOn = "mounted on "

// MountOf says which deltafs mount dir (absolute, symlinks resolved; no
// deltafs mount point itself) belongs to, for "deltafs umount" to name
// the one meant: the mount serving the store dir (isStore; the mount
// whose source in /proc/self/mountinfo is dir, else the mount point
// that dir's store lock names, a mount this process cannot see), or the
// deepest mount point holding dir. mnt is "" when dir is neither. It
// reads mountinfo once, and dir's lock only when dir holds a store.
func MountOf(dir string) (mnt string, isStore bool) {
	inside := ""
	for _, m := range mounts(fsType) {
		if m.source == dir {
			return m.point, true
		}
		if m.holds(dir) && len(m.point) > len(inside) {
			inside = m.point
		}
	}
	if inside != "" || !exists(filepath.Join(dir, "FORMAT")) {
		return inside, false
	}
	var held *objstore.LockError
	if errors.As(objstore.Holder(dir), &held) {
		if point, ok := strings.CutPrefix(held.Holder, mountedOn); ok {
			return point, true
		}
	}
	return "", false
}

// Unmounting reports whether err says that a store is locked by a mount
// process whose mount point no longer shows that mount: it has been
// unmounted, and the process is recording what was pending before it
// lets the store go (deltafs umount waits for that). mnt is where it was
// mounted.
func Unmounting(err error) (mnt string, ok bool) {
	var held *objstore.LockError
	if !errors.As(err, &held) {
		return "", false
	}
	point, isMount := strings.CutPrefix(held.Holder, mountedOn)
	if !isMount || MountSource(point) != "" || !sameMountNS(held.PID) || !holdsFile(held.PID, filepath.Join(held.Dir, "LOCK")) {
		return "", false
	}
	return point, true
}

// holdsFile reports whether process pid, as this process sees it, has
// the file at path open: the pid a store's lock records is its holder's
// in its own pid namespace (a container's), where here it may name
// another process altogether.
func holdsFile(pid, path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil || pid == "" {
		return false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	fds, _ := os.ReadDir(filepath.Join("/proc", pid, "fd"))
	for _, fd := range fds {
		if readLink(filepath.Join("/proc", pid, "fd", fd.Name())) == abs {
			return true
		}
	}
	return false
}

// sameMountNS reports whether process pid sees the mounts this one sees:
// a mount made in another mount namespace (a container's) is not in
// this process's mountinfo, and is not unmounting for that.
func sameMountNS(pid string) bool {
	theirs, err := os.Readlink(filepath.Join("/proc", pid, "ns", "mnt"))
	if err != nil || pid == "" {
		return false
	}
	ours, err := os.Readlink("/proc/self/ns/mnt")
	return err == nil && ours == theirs
}

// DetachDead lazily unmounts the deltafs mount on dir if its server is
// gone (killed) and reports whether it did. A mount is dead when dir
// answers ENOTCONN (serverGone), or when nobody holds the lock of its
// store (store, "" if unknown): a serving mount process holds it until
// it has unmounted. The next mount of the store records what was left
// pending.
func DetachDead(dir, store string) (bool, error) {
	dead := serverGone(dir) || store != "" && objstore.Holder(store) == nil
	if !dead || !IsDeltafsMount(dir) {
		return false, nil
	}
	if err := detach(dir); err != nil {
		return false, fmt.Errorf("detach %s: %w", dir, err)
	}
	return true, nil
}

// serverGone reports whether dir answers ENOTCONN: a FUSE mount point
// whose server is gone. A plain stat does not tell: the kernel answers
// it from the attributes it keeps (the live root's for an hour), which
// its permission checks (default_permissions, a mount with
// --allow-other) refresh at each path walk through the root, so a mount
// killed while in use kept answering stat, and a new mount on its mount
// point failed at the emptiness check (ENOTCONN). AT_STATX_FORCE_SYNC makes the kernel ask
// the server.
func serverGone(dir string) bool {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_STATX_FORCE_SYNC, unix.STATX_TYPE, &st)
	return errors.Is(err, syscall.ENOTCONN)
}

// clearDeadMount detaches a deltafs mount on dir whose server is gone, so
// that the store can be mounted there again. It changes nothing else.
func clearDeadMount(dir string) {
	_, _ = DetachDead(dir, "")
}
