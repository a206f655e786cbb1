package fs

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"
)

// Access answers access(2), faccessat(2) and the check before chdir(2),
// which the kernel asks the server only on a mount without
// default_permissions (see Options): a mount that lets no other user in,
// whose only caller is the user the server runs as. go-fuse's default
// checked the mode bits alone, against the groups of the user database:
// a directory a POSIX ACL opened to that user could be listed and read
// but not entered (cd), and test -r said no. The live file's own check,
// as the server's user, takes ACLs and the process's groups.
func (n *Node) Access(ctx context.Context, mask uint32) syscall.Errno {
	// The plain syscall (real ids, the server's own): x/sys emulates
	// AT_EACCESS from the mode bits when faccessat2 answers EPERM, which
	// it does for an immutable file.
	if err := unix.Faccessat(unix.AT_FDCWD, n.livePath(), mask, 0); err != nil {
		return n.fsys.errno("access", err)
	}
	return 0
}

// readOnlyAccess is Access of a node of the read-only views (a snapshot's
// content, .history): writing is refused, as a read-only mount does, and
// reading and searching are the caller's, who owns the store and can
// read every revision with deltafs cat (see Options).
func readOnlyAccess(mask uint32) syscall.Errno {
	if mask&unix.W_OK != 0 {
		return syscall.EROFS
	}
	return 0
}

func (n *viewNode) Access(ctx context.Context, mask uint32) syscall.Errno {
	return readOnlyAccess(mask)
}

func (histReadOnly) Access(ctx context.Context, mask uint32) syscall.Errno {
	return readOnlyAccess(mask)
}

// Access of .snapshots: its owner takes, renames and deletes snapshots
// in it (liveRootOwner), and only its owner reaches it (see Options).
func (s *SnapshotsDir) Access(ctx context.Context, mask uint32) syscall.Errno {
	return 0
}

func (s *snapshotsDir) Access(ctx context.Context, mask uint32) syscall.Errno {
	return 0
}
