package mount

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestCheckMountPoint(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) string {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, p)
	}
	empty := mk("empty")
	full := mk("full")
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mnt2 := mk("m2")
	tests := []struct {
		name, mnt, store string
		want             error
	}{
		{"ok", empty, filepath.Join(dir, "store"), nil},
		{"missing", filepath.Join(dir, "nope"), filepath.Join(dir, "store"), ErrMountPoint},
		{"a file", file, filepath.Join(dir, "store"), ErrMountPoint},
		{"not empty", full, filepath.Join(dir, "store"), ErrMountPoint},
		{"store inside mount point", mnt2, filepath.Join(mnt2, "store"), ErrOverlap},
		{"mount point inside store", empty, dir, ErrOverlap},
		{"same", empty, empty, ErrOverlap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := checkMountPoint(tt.mnt, tt.store)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("checkMountPoint(%s, %s) = %v, want %v", tt.mnt, tt.store, err, tt.want)
			}
		})
	}
}

func TestCheckFUSEMissingDevice(t *testing.T) {
	if err := checkFUSE(filepath.Join(t.TempDir(), "fuse")); !errors.Is(err, ErrNoFUSE) {
		t.Fatalf("checkFUSE of a missing device: %v, want ErrNoFUSE", err)
	}
}

// TestMountRefusesStoreWithoutXattrs: a store whose filesystem keeps no
// user xattrs (ramfs; another deltafs mount, which refuses its own
// namespace to users) would record no history, so a mount refuses it
// with ErrNoXattrs naming the filesystem, and leaves no new store behind;
// a store that takes them mounts and keeps no probe attribute.
func TestMountRefusesStoreWithoutXattrs(t *testing.T) {
	testutil.RequireFUSE(t)
	rfs := ramfs(t)
	outer := start(t, filepath.Join(t.TempDir(), "s.dfs"))
	for _, c := range []struct{ dir, fs string }{{rfs, "ramfs"}, {outer.mnt, "fuse.deltafs"}} {
		store := filepath.Join(c.dir, "s.dfs")
		ctx, cancel := context.WithCancel(context.Background())
		err := Run(ctx, Config{Store: store, MountPoint: t.TempDir(), Ready: func(*Mounted) { cancel() }}) // mounted: unmount at once
		cancel()
		if !errors.Is(err, ErrNoXattrs) || !strings.Contains(err.Error(), c.fs) || strings.Contains(err.Error(), "\n") {
			t.Errorf("mount of a store on %s: %v; want one line of ErrNoXattrs naming %s", c.fs, err, c.fs)
		}
		if _, err := os.Lstat(store); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused mount left %s behind: %v", store, err)
		}
	}
	live := filepath.Join(outer.store, liveDir)
	if _, err := unix.Getxattr(live, xattrProbe, nil); !errors.Is(err, unix.ENODATA) {
		t.Errorf("probe attribute left on %s: %v", live, err)
	}
}

// ramfs mounts a ramfs (which keeps no user xattrs) on a fresh directory.
func ramfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "ramfs", 0, ""); err != nil {
		testutil.SkipOrFail(t, "mount ramfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount ramfs: %v", err)
		}
	})
	return dir
}
