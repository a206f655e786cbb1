package mount

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/deltafs/deltafs/objstore"
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
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	store := ""
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) > 4 && len(g) > 1 && g[0] == fsType && unescapeMountinfo(f[4]) == dir {
			store = unescapeMountinfo(g[1])
		}
	}
	return store
}

// DetachDead lazily unmounts the deltafs mount on dir if its server is
// gone (killed) and reports whether it did. A mount is dead when dir
// answers ENOTCONN, or when nobody holds the lock of its store (store,
// "" if unknown): a serving mount process holds it until it has
// unmounted. The next mount of the store records what was left pending.
func DetachDead(dir, store string) (bool, error) {
	_, err := os.Stat(dir)
	dead := errors.Is(err, syscall.ENOTCONN) || store != "" && objstore.Holder(store) == nil
	if !dead || !IsDeltafsMount(dir) {
		return false, nil
	}
	if err := detach(dir); err != nil {
		return false, fmt.Errorf("detach %s: %w", dir, err)
	}
	return true, nil
}

// clearDeadMount detaches a deltafs mount on dir whose server is gone, so
// that the store can be mounted there again. It changes nothing else.
func clearDeadMount(dir string) {
	_, _ = DetachDead(dir, "")
}
