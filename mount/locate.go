package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNoStore matches a path that is neither a store nor inside a deltafs
// mount (or, for Locate, inside a store's live directory).
var ErrNoStore = errors.New("not a deltafs store, nor inside a deltafs mount")

// Locate finds the file at path for the history commands: the store that
// holds it and its path relative to the tree root (slash-separated). path
// is inside a deltafs mount (relative to its mount point) or inside an
// unmounted store's live directory (STORE/live/...). A final symlink is
// not followed; the directories leading to it are.
func Locate(path string) (store, rel string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	// A missing directory is taken as written: inside a mount, the
	// mount answers that the file has no history.
	dir, base := filepath.Split(abs)
	if dir, err = filepath.EvalSymlinks(dir); err == nil {
		abs = filepath.Join(dir, base)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	if mnt, src := containingMount(abs); mnt != "" {
		if err := mountStore(abs, mnt, src); err != nil {
			return "", "", err
		}
		rel, err := filepath.Rel(mnt, abs)
		return src, filepath.ToSlash(rel), err
	}
	for d := abs; d != filepath.Dir(d); d = filepath.Dir(d) {
		if filepath.Base(d) == liveDir && exists(filepath.Join(filepath.Dir(d), "FORMAT")) {
			rel, err := filepath.Rel(d, abs)
			return filepath.Dir(d), filepath.ToSlash(rel), err
		}
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		return "", "", missing(path)
	} else if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	return "", "", fmt.Errorf("%s: %w (give the store with --store)", abs, ErrNoStore)
}

// missing is the error of a path that does not exist where a store, or
// a path in a store or mount, was expected.
func missing(path string) error {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return fmt.Errorf("%s: %w: no such file or directory", path, ErrNoStore)
}
