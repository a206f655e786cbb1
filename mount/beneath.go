package mount

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/deltafs/deltafs/fs"
	"golang.org/x/sys/unix"
)

// A restore writes a file a user of the mount can move or replace while
// the restore runs, as root: a path it opened by name let such a user
// swap a symlink in for the file or a directory above it and have the
// restore overwrite, create or remove a file outside the tree (a review
// overwrote a root-owned file so). These open and make paths under a
// root directory (the mount point, or the store's live tree) with no
// symlink followed on the way: a swapped symlink is an error (ELOOP).

// openBeneath opens rel (slash-separated, relative) under the directory
// root with flags, no symlink followed.
func openBeneath(root, rel string, flags int, mode uint32) (*os.File, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rfd)
	fd, err := fs.OpenBeneath(rfd, rel, flags, mode)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(root, filepath.FromSlash(rel)), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, filepath.FromSlash(rel))), nil
}

// mkdirAllBeneath makes every missing directory of rel under root (mode
// perm, as os.MkdirAll), none made or entered through a symlink.
func mkdirAllBeneath(root, rel string, perm uint32) error {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: root, Err: err}
	}
	dfd := rfd
	defer func() { unix.Close(dfd) }()
	for _, name := range strings.Split(path.Clean(rel), "/") {
		if name == "." || name == "" {
			continue
		}
		err := unix.Mkdirat(dfd, name, perm)
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return &os.PathError{Op: "mkdir", Path: filepath.Join(root, filepath.FromSlash(rel)), Err: err}
		}
		next, err := fs.OpenBeneath(dfd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return &os.PathError{Op: "mkdir", Path: filepath.Join(root, filepath.FromSlash(rel)), Err: err}
		}
		unix.Close(dfd)
		dfd = next
	}
	return nil
}

// removeBeneath removes rel under root if it is still the file f (a
// restore's own, failed): never another file swapped in for it.
func removeBeneath(root, rel string, f *os.File) error {
	var mine unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &mine); err != nil {
		return err
	}
	return removeInoBeneath(root, rel, mine)
}

// removeInoBeneath is removeBeneath of the file whose stat is mine.
func removeInoBeneath(root, rel string, mine unix.Stat_t) error {
	dir, err := openBeneath(root, path.Dir(rel), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	var st unix.Stat_t
	base := path.Base(rel)
	if err := unix.Fstatat(int(dir.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Ino != mine.Ino || st.Dev != mine.Dev {
		return fmt.Errorf("%s is no longer the file the restore made: left as it is", filepath.Join(root, filepath.FromSlash(rel)))
	}
	return unix.Unlinkat(int(dir.Fd()), base, 0)
}

// openSameBeneath opens rel under root for writing, no symlink followed,
// if it is still the file of inode ino, and empties it: the restore's
// rewrite of a live file through the mount.
func openSameBeneath(root, rel string, ino uint64) (*os.File, error) {
	f, err := openBeneath(root, rel, unix.O_WRONLY|unix.O_NONBLOCK, 0) // a FIFO swapped in: ENXIO, not a wait
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Ino != ino {
		f.Close()
		return nil, errors.Join(err, fmt.Errorf("%s was moved or replaced while the restore ran: nothing written", f.Name()))
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
