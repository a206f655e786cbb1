package fs

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// openLive opens the live file at the live-tree relative path rel without
// following any symlink on the way (openat2 with RESOLVE_NO_SYMLINKS from
// the live root), so that a symlink swapped in for a directory between
// lookup and open cannot make the server open a file outside the tree.
func (f *FS) openLive(rel string, flags int, mode uint32) (int, error) {
	if rel == "" {
		rel = "."
	}
	return OpenBeneath(f.rootFd, rel, flags, mode)
}

// OpenBeneath opens rel under the directory dfd with flags (and, with
// O_CREAT, mode's permission bits), following no symlink on the way nor
// at its end (openat2 RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH, O_NOFOLLOW;
// with O_PATH a final symlink is opened as one). The one resolution
// every access of the mount to its live tree and of a restore to the
// mount goes through.
func OpenBeneath(dfd int, rel string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags | syscall.O_CLOEXEC | syscall.O_NOFOLLOW),
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	}
	if flags&syscall.O_CREAT != 0 {
		how.Mode = uint64(mode & 0o7777) // FUSE sends the file type bits too
	}
	for {
		fd, err := unix.Openat2(dfd, rel, &how)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
