package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/mount"
	"github.com/deltafs/deltafs/objstore"
)

// checkStorePath checks the store path of the commands that open the
// store itself and create nothing (gc, repack, mount --read-only), where
// the store's own check would only find no FORMAT file in it:
//   - a path that does not exist is "PATH: not a deltafs store...: no
//     such file or directory" (exit 5), as stats, snapshot and the
//     history commands say;
//   - a deltafs mount point, or a path inside a mount (which stats,
//     verify and snapshot take for its store), names the mounted store
//     and how to unmount it: the store is in use (exit 4), as it is when
//     given by its own path.
func checkStorePath(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w: no such file or directory", abs, objstore.ErrNotStore)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if _, err := os.Lstat(filepath.Join(abs, "FORMAT")); err == nil {
		return nil // a store (one copied into a mount is still one)
	}
	mnt := abs
	store := mount.MountSource(abs)
	if store == "" {
		if mnt, _ = mount.MountOf(abs); mnt == "" {
			return nil
		}
		if store = mount.MountSource(mnt); store == "" {
			return nil
		}
	}
	return &mountedPathError{path: abs, mnt: mnt, store: store}
}

// mountedPathError: a command that works on an unmounted store was given
// a path of the mount serving it.
type mountedPathError struct{ path, mnt, store string }

func (e *mountedPathError) Error() string {
	where := "the mount point of a deltafs mount"
	if e.path != e.mnt {
		where = "inside a deltafs mount"
	}
	return fmt.Sprintf("%s is %s: store %s is mounted on %s (unmount it with 'deltafs umount %s', then give the store)",
		e.path, where, e.store, e.mnt, e.mnt)
}

func (e *mountedPathError) Unwrap() error { return objstore.ErrLocked }
