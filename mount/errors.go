package mount

import "errors"

// Errors of the checks made before anything is changed; each selects its
// own exit code in cmd/deltafs. They are matched with errors.Is.
var (
	// ErrMountPoint: the mount point is missing, not a directory or not
	// empty.
	ErrMountPoint = errors.New("unusable mount point")
	// ErrOverlap: the mount point and the store contain one another.
	ErrOverlap = errors.New("mount point and store overlap")
	// ErrNoFUSE: /dev/fuse is missing or cannot be opened, or (not root)
	// fusermount3 is missing.
	ErrNoFUSE = errors.New("FUSE is not available")
	// ErrNoXattrs: the filesystem of the store's live directory keeps no
	// user extended attributes (ramfs, a store inside another deltafs
	// mount, ...), where a live file's identity lives: without them no
	// history is recorded.
	ErrNoXattrs = errors.New("filesystem keeps no user xattrs")
	// ErrBusy: a process has a file or directory open in the mount, so
	// that it cannot be unmounted (deltafs umount).
	ErrBusy = errors.New("mount is busy")
	// ErrShutdown: the shutdown did not finish within its deadline.
	ErrShutdown = errors.New("shutdown deadline exceeded")
)
