package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNoStore matches a path that is neither a store nor inside a deltafs
// mount (or, for Locate, inside a store's live directory).
var ErrNoStore = errors.New("not a deltafs store, nor inside a deltafs mount")

// Locate finds the file at path for the history commands: the store that
// holds it and its path relative to the tree root (slash-separated). path
// is inside a deltafs mount (relative to its mount point) or inside an
// unmounted store's live directory (STORE/live/...). A final symlink is
// not followed; the directories leading to it are, but only through
// symlinks of the caller's or root's (foreignSymlink): another user's
// symlink could lead a command of root's to a third user's file (a
// review had root's restore of one user's file restore another's).
func Locate(path string) (store, rel string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	if err := foreignSymlink(filepath.Dir(abs)); err != nil {
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

// ErrForeignSymlink: a path leads through another user's symlink.
var ErrForeignSymlink = errors.New("leads through another user's symlink")

// foreignSymlink returns an error if a symlink on the way to dir (dir
// included), at any depth of the links it leads to, belongs to a user
// other than the caller and root.
func foreignSymlink(dir string) error {
	uid := uint32(os.Geteuid())
	seen := 0
	var walk func(p string) error
	walk = func(p string) error {
		cur := "/"
		for _, name := range strings.Split(filepath.Clean(p), "/") {
			if name == "" {
				continue
			}
			next := filepath.Join(cur, name)
			var st syscall.Stat_t
			if err := syscall.Lstat(next, &st); err != nil {
				return nil // missing: taken as written
			}
			if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
				cur = next
				continue
			}
			if st.Uid != uid && st.Uid != 0 {
				return fmt.Errorf("%s (owned by uid %d): %w; give the path it leads to", next, st.Uid, ErrForeignSymlink)
			}
			if seen++; seen > 40 {
				return nil // a loop: EvalSymlinks reports it
			}
			target, err := os.Readlink(next)
			if err != nil {
				return nil
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			if err := walk(target); err != nil {
				return err
			}
			if cur, err = filepath.EvalSymlinks(next); err != nil {
				return nil
			}
		}
		return nil
	}
	return walk(dir)
}

// missing is the error of a path that does not exist where a store, or
// a path in a store or mount, was expected.
func missing(path string) error {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return fmt.Errorf("%s: %w: no such file or directory", path, ErrNoStore)
}
