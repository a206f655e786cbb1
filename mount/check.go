package mount

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// fuseDevice is the kernel's FUSE device.
const fuseDevice = "/dev/fuse"

// checkMountPoint checks that mnt is an existing, empty directory the
// caller may mount on, and that it and store do not contain one another.
// It returns both paths absolute with symlinks resolved (the store's
// missing tail kept as given).
func checkMountPoint(mnt, store string) (string, string, error) {
	absMnt, err := filepath.Abs(mnt)
	if err == nil {
		clearDeadMount(absMnt)
		absMnt, err = filepath.EvalSymlinks(absMnt)
	}
	if err != nil {
		return "", "", fmt.Errorf("mount point %s: %w: %w", mnt, ErrMountPoint, err)
	}
	if err := checkEmptyDir(absMnt); err != nil {
		return "", "", err
	}
	if os.Geteuid() != 0 && unix.Access(absMnt, unix.W_OK) != nil {
		return "", "", fmt.Errorf("mount point %s: %w", absMnt, os.ErrPermission)
	}
	absStore, err := resolvePartial(store)
	if err != nil {
		return "", "", fmt.Errorf("store %s: %w", store, err)
	}
	if within(absStore, absMnt) || within(absMnt, absStore) {
		return "", "", fmt.Errorf("%w: store %s, mount point %s", ErrOverlap, absStore, absMnt)
	}
	return absMnt, absStore, nil
}

// checkEmptyDir checks that dir is a directory with no entries.
func checkEmptyDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("mount point %s: %w: %w", dir, ErrMountPoint, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("mount point %s: %w: %w", dir, ErrMountPoint, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mount point %s: %w: not a directory", dir, ErrMountPoint)
	}
	if _, err := f.Readdirnames(1); !errors.Is(err, io.EOF) {
		if err == nil {
			return fmt.Errorf("mount point %s: %w: not empty (or already mounted)", dir, ErrMountPoint)
		}
		return fmt.Errorf("mount point %s: %w: %w", dir, ErrMountPoint, err)
	}
	return nil
}

// resolvePartial makes p absolute and resolves symlinks in its longest
// existing prefix (a new store does not exist yet).
func resolvePartial(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var tail []string
	for cur := abs; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{r}, tail...)...), nil
		}
		if cur == filepath.Dir(cur) {
			return abs, nil
		}
		tail = append([]string{filepath.Base(cur)}, tail...)
	}
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// checkFUSE checks that a mount can be attempted at all, with device the
// FUSE device (fuseDevice but in tests).
func checkFUSE(device string) error {
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoFUSE, err)
	}
	f.Close()
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			return fmt.Errorf("%w: not root and no fusermount3 (Debian package fuse3)", ErrNoFUSE)
		}
	}
	return nil
}

// xattrProbe is the attribute checkXattrs sets and removes: one of
// deltafs's own (fs.XattrID's namespace), which a deltafs mount refuses
// to its users, so that a store inside another deltafs mount fails too.
const xattrProbe = "user.deltafs.probe"

// checkXattrs checks that the filesystem of dir (the store's live
// directory, or the directory of a store being created) keeps user
// xattrs: every live file's identity is one (fs.XattrID), and a file
// without one is never recorded. It sets and removes xattrProbe on dir
// itself, so that it leaves nothing behind; store names the store in
// the error.
func checkXattrs(dir, store string) error {
	err := unix.Setxattr(dir, xattrProbe, []byte{1}, 0)
	if err == nil {
		err = unix.Removexattr(dir, xattrProbe)
	}
	if err == nil {
		return nil
	}
	kind := fsTypeOf(dir)
	if kind == "" {
		kind = "a filesystem of unknown type"
	}
	// %v, not %w: an EPERM (a deltafs mount's answer) is no
	// permission problem of the user's.
	return fmt.Errorf("%w: the store %s is on %s (setxattr %s: %v); a store needs user xattrs, where deltafs keeps each live file's identity",
		ErrNoXattrs, store, kind, xattrProbe, err)
}

// makeStoreDir creates the directory of a new store, and its missing
// parents, before any of its files (0700, as objstore makes it), and
// returns the topmost directory it made ("" if the store existed). A
// check that fails then removes that much and nothing was ever written
// below it: inside another deltafs mount, a store's files created and
// removed again would be recorded there as deleted files.
//
// Each directory it makes is fsynced in its parent (index.MkdirAllSync,
// as objstore makes a store directory itself; objstore then finds this
// one made and syncs nothing): without it a power cut could take the
// whole new store away, every revision and every live file acknowledged
// by an fsync in it included. A failure after top was made is returned
// with top, which the caller removes.
func makeStoreDir(store string) (string, error) {
	top := ""
	for d := store; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", nil // objstore says what is wrong with it
		}
		top = d
		if filepath.Dir(d) == d {
			break
		}
	}
	if top == "" {
		return "", nil
	}
	if err := index.MkdirAllSync(store, 0o700); err != nil {
		if _, serr := os.Lstat(top); serr != nil {
			return "", nil // objstore tries again and says why it failed
		}
		return top, fmt.Errorf("create %s: %w", store, err)
	}
	return top, nil
}

// fsTypeOf returns the type of the filesystem holding dir (absolute,
// symlinks resolved), as /proc/self/mountinfo names it, or "".
func fsTypeOf(dir string) string {
	best, kind := -1, ""
	for _, m := range mounts("") {
		// The deepest mount point holding dir; of equal ones the last
		// mounted, which hides the others.
		if m.holds(dir) && len(m.point) >= best {
			best, kind = len(m.point), m.fstype
		}
	}
	return kind
}
