package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fusectlDir is where the kernel's FUSE control filesystem (fusectl)
// lists one directory per connection, named by the minor number of the
// mount's device.
const fusectlDir = "/sys/fs/fuse/connections"

// AbortFUSE aborts the FUSE connection of the mount at mnt, as
// `echo 1 > /sys/fs/fuse/connections/N/abort` does: every request in
// flight fails and the server's reads of /dev/fuse end. A fresh machine
// may not have the control filesystem mounted (systemd mounts it at
// boot; a bare one does not): AbortFUSE mounts it then, as root. It
// skips t when it cannot abort, and fails t instead under CI=true.
func AbortFUSE(t testing.TB, mnt string) {
	t.Helper()
	if err := abortFUSE(mnt); err != nil {
		SkipOrFail(t, "cannot abort the FUSE connection: %v", err)
	}
}

func abortFUSE(mnt string) error {
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		return err
	}
	if err := mountFusectl(); err != nil {
		return err
	}
	return abortConn(fmt.Sprint(unix.Minor(st.Dev)))
}

// abortConn aborts the FUSE connection named minor in fusectl.
func abortConn(minor string) error {
	return os.WriteFile(fmt.Sprintf("%s/%s/abort", fusectlDir, minor), []byte("1"), 0o200)
}

// mountFusectl mounts the control filesystem on fusectlDir unless the
// mount table has it there already.
func mountFusectl() error {
	if Mounted(fusectlDir) {
		return nil
	}
	err := unix.Mount("fusectl", fusectlDir, "fusectl", 0, "")
	if err == unix.EBUSY { // mounted meanwhile by someone else
		return nil
	}
	if err != nil {
		return fmt.Errorf("mount fusectl on %s: %w", fusectlDir, err)
	}
	return nil
}

// AbortFUSEMountedAt aborts the FUSE connection of every mount the mount
// table has at mnt, found by the device numbers the table lists: unlike
// AbortFUSE it sends no request to the mount (a stat would wait for a
// server that may never answer). It returns how many it aborted.
func AbortFUSEMountedAt(mnt string) (int, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	if err := mountFusectl(); err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || unescapeMountinfo(f[4]) != mnt {
			continue
		}
		_, minor, ok := strings.Cut(f[2], ":")
		if !ok {
			continue
		}
		if _, err := os.Stat(filepath.Join(fusectlDir, minor)); err != nil {
			continue // not a FUSE mount
		}
		if err := abortConn(minor); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
