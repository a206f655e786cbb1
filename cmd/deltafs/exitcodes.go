package main

import (
	"errors"
	"fmt"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/mount"
)

// Process exit codes of deltafs. This file is the only place that defines
// them; add a code here together with the error that selects it in
// exitCode.
const (
	exitOK      = 0 // success
	exitFailure = 1 // the command ran and failed (I/O error, corrupt input, ...)
	exitUsage   = 2 // the command line was wrong; nothing was done

	exitMountPoint  = 3  // mount point missing, not an empty directory, overlapping the store, or not a deltafs mount
	exitStoreLocked = 4  // the store is in use (mounted) by another process
	exitNotStore    = 5  // the path holds something that is not a deltafs store (or a newer format, or one without its index/), or is on a filesystem that cannot hold one (no user xattrs)
	exitNoFUSE      = 6  // no /dev/fuse, or no fusermount3 for a user
	exitPermission  = 7  // permission denied on the store or the mount point
	exitProblems    = 8  // verify ran and found problems in the store
	exitNotFound    = 9  // no such revision, snapshot or file history (log, cat, restore, snapshot delete/rename)
	exitIsDir       = 10 // a directory where a file's history was asked for (log, cat, restore)
	exitBusy        = 11 // umount: a process has a file or directory open in the mount
)

// usageError marks an error in the command line itself: an unknown flag
// or command, a wrong number of arguments, an unusable combination.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a usageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// exitCode maps an error returned by a command to the process exit code.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case isProblems(err):
		return exitProblems
	case mountErrorCode(err) != 0:
		return mountErrorCode(err)
	case errors.Is(err, mount.ErrIsDir):
		return exitIsDir
	case errors.Is(err, index.ErrNotFound):
		return exitNotFound
	default:
		return exitFailure
	}
}
