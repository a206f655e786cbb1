package testutil

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Mount mounts the node tree root on a fresh directory in t.TempDir(),
// with go-fuse's debug output when the test runs under -v, and unmounts
// it in t.Cleanup, failing the test if unmounting fails. opts may be nil;
// the helper fills in names and debug. It returns the mount point and the
// server. Call RequireFUSE first.
func Mount(t testing.TB, root fs.InodeEmbedder, opts *fs.Options) (string, *fuse.Server) {
	t.Helper()
	if opts == nil {
		opts = &fs.Options{}
	}
	if opts.FsName == "" {
		opts.FsName = "deltafs-test"
	}
	if opts.Name == "" {
		opts.Name = "deltafs"
	}
	opts.Debug = opts.Debug || testing.Verbose() && os.Getenv("DELTAFS_FUSE_DEBUG") != "0"
	dir := t.TempDir()
	server, err := fs.Mount(dir, root, opts)
	if err != nil {
		t.Fatalf("mount on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := Unmount(server, dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir, server
}

// Unmount unmounts server, retrying for a few seconds while the mount is
// busy (a test's last close can still be in flight), and checks that
// dir is no longer a mount point.
func Unmount(server *fuse.Server, dir string) error {
	var err error
	for range 50 {
		if err = server.Unmount(); err == nil || !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		// Detach it anyway, so that t.TempDir's cleanup does not walk
		// into a live mount, and report the failure.
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		return err
	}
	server.Wait()
	if Mounted(dir) {
		return fmt.Errorf("%s is still a mount point after unmount", dir)
	}
	return nil
}

// Mounted reports whether dir is a mount point in /proc/self/mountinfo.
func Mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMountinfo(f[4]) == dir {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes the octal escapes (\040 for a space, ...) of
// a path in /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
