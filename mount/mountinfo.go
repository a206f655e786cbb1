package mount

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// fsType is the type a deltafs mount shows in /proc/self/mountinfo.
const fsType = "fuse.deltafs"

// IsDeltafsMount reports whether dir (absolute, symlinks resolved) is a
// deltafs mount point.
func IsDeltafsMount(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if ok && len(f) > 4 && unescapeMountinfo(f[4]) == dir && strings.HasPrefix(post, fsType+" ") {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes the octal escapes of /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// detach lazily unmounts dir: mount(2) as root, fusermount3 otherwise.
func detach(dir string) error {
	if os.Geteuid() == 0 {
		return syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	return exec.Command("fusermount3", "-u", "-z", dir).Run()
}
