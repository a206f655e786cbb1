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
	how := unix.OpenHow{
		Flags:   uint64(flags | syscall.O_CLOEXEC | syscall.O_NOFOLLOW),
		Mode:    uint64(mode & 0o7777), // FUSE sends the file type bits too
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	}
	if flags&syscall.O_CREAT == 0 {
		how.Mode = 0
	}
	for {
		fd, err := unix.Openat2(f.rootFd, rel, &how)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
