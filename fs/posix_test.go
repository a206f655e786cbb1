package fs_test

import (
	"os"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixExcluded lists the posixtest cases not run, each with its reason.
var posixExcluded = map[string]string{
	// fcntl(2): a process's own POSIX record locks never conflict, as on
	// ext4; the case expects the OFD emulation of a server that takes
	// the locks, and deltafs leaves them to the kernel (fs/options.go;
	// mount's TestFileLocks checks locks across descriptions).
	"FcntlFlockLocksFile": "two POSIX locks of one process do not conflict on a local file system either; the case tests a server's OFD emulation",
	"Tmpfile":             "O_TMPFILE is refused on purpose (EOPNOTSUPP): a nameless file could be linked in later by a descriptor the live tree never saw opened",
}

// TestPosix runs go-fuse's POSIX battery against a mounted live tree.
func TestPosix(t *testing.T) {
	for name, fn := range posixtest.All {
		t.Run(name, func(t *testing.T) {
			if why, ok := posixExcluded[name]; ok {
				t.Skip(why)
			}
			m := mountLive(t)
			// A subdirectory: at the root, .snapshots and .history exist
			// (unlisted), which the directory tests do not expect.
			dir := m.path("posix")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fn(t, dir)
		})
	}
}
