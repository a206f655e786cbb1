package mount

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// fsType is the type a deltafs mount shows in /proc/self/mountinfo.
const fsType = "fuse.deltafs"

// mountEntry is a mount of /proc/self/mountinfo: its mount point, its
// filesystem type and its source, unescaped.
type mountEntry struct {
	point, fstype, source string
	super                 string // the super block's options (user_id=... for FUSE)
}

// mounts returns this process's mounts in /proc/self/mountinfo's order
// (later mounts last), of type fstype only unless it is "", or nil if
// the table cannot be read.
func mounts(fstype string) []mountEntry {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var ms []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 || fstype != "" && g[0] != fstype {
			continue
		}
		e := mountEntry{point: unescapeMountinfo(f[4]), fstype: g[0], source: unescapeMountinfo(g[1])}
		if len(g) > 2 {
			e.super = g[2]
		}
		ms = append(ms, e)
	}
	return ms
}

// holds reports whether m's mount point is dir or above it.
func (m mountEntry) holds(dir string) bool { return within(dir, m.point) || m.point == "/" }

// MountOwner returns the user who mounted the deltafs mount on dir
// (absolute, symlinks resolved; the last of several stacked there, the
// one an unmount takes), as the kernel names it (user_id), and whether it
// found one.
func MountOwner(dir string) (uint32, bool) {
	ms := mounts(fsType)
	for i := len(ms) - 1; i >= 0; i-- { // the top one of mounts stacked on dir
		m := ms[i]
		if m.point != dir {
			continue
		}
		for _, o := range strings.Split(m.super, ",") {
			if v, ok := strings.CutPrefix(o, "user_id="); ok {
				uid, err := strconv.ParseUint(v, 10, 32)
				return uint32(uid), err == nil
			}
		}
		return 0, false
	}
	return 0, false
}

// IsDeltafsMount reports whether dir (absolute, symlinks resolved) is a
// deltafs mount point.
func IsDeltafsMount(dir string) bool {
	for _, m := range mounts(fsType) {
		if m.point == dir {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes the octal escapes of /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// detach lazily unmounts dir: umount2(2) as root, fusermount3 otherwise
// (a user may not call umount2 on the mount fusermount3 made for it).
func detach(dir string) error {
	if os.Geteuid() == 0 {
		return syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	out, err := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput()
	if msg := strings.TrimSpace(string(out)); err != nil && msg != "" {
		return errors.New(msg)
	}
	return err
}
