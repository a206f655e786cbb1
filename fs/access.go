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
	if n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return 0 // a symlink's own check (AT_SYMLINK_NOFOLLOW): as on a local disk
	}
	// The plain faccessat (flags 0: the real ids, the server's own, as
	// the caller's): with flags, x/sys tries faccessat2 and, where that
	// answers EPERM (an immutable file), guesses from the mode bits.
	if err := n.inDir(func(p string) error { return unix.Faccessat(unix.AT_FDCWD, p, mask, 0) }); err != nil {
		return n.fsys.errno("access", err)
	}
	return 0
}

// readOnlyAccess is Access of a node of mode mode in the read-only views
// (a snapshot's content, .history): writing is refused, as a read-only
// mount does; reading and searching are the caller's, who owns the store
// and can read every revision with deltafs cat (see Options); executing
// a file needs an execute bit, even for root.
func readOnlyAccess(mask, mode uint32) syscall.Errno {
	switch {
	case mask&unix.W_OK != 0:
		return syscall.EROFS
	case mask&unix.X_OK != 0 && mode&syscall.S_IFMT != syscall.S_IFDIR && mode&0o111 == 0:
		return syscall.EACCES
	}
	return 0
}

func (n *viewNode) Access(ctx context.Context, mask uint32) syscall.Errno {
	if n.e.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return 0
	}
	return readOnlyAccess(mask, n.e.Mode)
}

// Access of .history's directories and listings.
func (histReadOnly) Access(ctx context.Context, mask uint32) syscall.Errno {
	return readOnlyAccess(mask, syscall.S_IFDIR)
}

// Access of a revision: a regular file, 0400.
func (r *histRev) Access(ctx context.Context, mask uint32) syscall.Errno {
	return readOnlyAccess(mask, syscall.S_IFREG|0o400)
}

// Access of .snapshots: its owner takes, renames and deletes snapshots
// in it (liveRootOwner), and only its owner reaches it (see Options).
func (s *SnapshotsDir) Access(ctx context.Context, mask uint32) syscall.Errno {
	return 0
}

// Access of the placeholder .snapshots, which takes no entry.
func (s *snapshotsDir) Access(ctx context.Context, mask uint32) syscall.Errno {
	return readOnlyAccess(mask, syscall.S_IFDIR)
}
