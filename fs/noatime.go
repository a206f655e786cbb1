package fs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The mount's own reads of live files (a recording, a snapshot, a
// verify, the check after an unclean end) open them with O_NOATIME:
// under relatime a read moves a file's atime when it is not past its
// mtime, and a snapshot that read a file it had to hash stored, and the
// live tree showed, the time of the snapshot as the file's atime (a
// user review). O_NOATIME needs the file's owner or CAP_FOWNER; without
// either the open is made without it.

// withNoAtime calls open with flags and O_NOATIME, and again without
// O_NOATIME if that is refused (EPERM).
func withNoAtime[T any](flags int, open func(flags int) (T, error)) (T, error) {
	v, err := open(flags | unix.O_NOATIME)
	if errors.Is(err, syscall.EPERM) {
		return open(flags)
	}
	return v, err
}

// OpenRead opens the live file at path for the mount's own reading, as
// os.OpenFile(path, os.O_RDONLY|more, 0) does, leaving its atime alone
// where it may.
func OpenRead(path string, more int) (*os.File, error) {
	return withNoAtime(os.O_RDONLY|more, func(flags int) (*os.File, error) {
		return os.OpenFile(path, flags, 0)
	})
}

// OpenReadBeneath is OpenRead of rel (slash-separated) under the
// directory root, with no symlink followed on the way nor at its end
// (openat2 RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH: ELOOP): a user of the
// mount who swaps a symlink in for a directory of the live tree cannot
// make the mount read a file outside it (into a revision of their own
// file, which they may read back).
func OpenReadBeneath(root, rel string, more int) (*os.File, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rfd)
	name := filepath.Join(root, filepath.FromSlash(rel))
	return withNoAtime(os.O_RDONLY|more, func(flags int) (*os.File, error) {
		fd, err := OpenBeneath(rfd, rel, flags, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	})
}
