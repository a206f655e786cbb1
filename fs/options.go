package fs

import (
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// cacheTimeout is the mount-wide timeout of entries and attributes
// (go-fuse's default): what the .snapshots and .history views keep where
// their names change behind the kernel's back. The live tree sets its
// own, liveTimeout, and so does the negative entry of every miss but the
// views' (see cache.go).
const cacheTimeout = time.Second

// maxWrite is the largest WRITE request: 1 MiB instead of the kernel's
// default 128 KiB cuts the number of requests of a large sequential write
// eightfold.
const maxWrite = 1 << 20

// No writeback cache (CAP_WRITEBACK_CACHE): the kernel does not combine
// it with passthrough, and passthrough reads matter more. Measured here:
// writeback cut a random 4 KiB write from 45 to 32 us (one GETXATTR
// security.capability round trip per write remains), but every read-only
// open fell back to the server.

// killprivV2 is CAP_HANDLE_KILLPRIV_V2: we drop the setuid and setgid
// bits on writes and truncations ourselves (killpriv.go), so the kernel
// stops asking for security.capability before every write of an inode
// that has none. Without it each 4 KiB WRITE came with a GETXATTR round
// trip (counted with strace: 2,000 lgetxattr for 2,000 writes; with it,
// one), which the loopback pays too, on top of its passthrough write.
const killprivV2 = fuse.CAP_HANDLE_KILLPRIV_V2

// File locks (fcntl, flock) are left to the kernel: without
// CAP_POSIX_LOCKS and CAP_FLOCK_LOCKS it keeps them itself, with Linux's
// own semantics, for every file of the mount, the read-only views' as the
// live tree's. Every process that locks a file of the mount goes through
// this kernel, so nothing needs the server. With the locks handed to the
// server (go-fuse's EnableLocks), a file of .snapshots or .history could
// not be locked at all (EOPNOTSUPP: sqlite3 could not open a database
// there), and the live tree emulated them with OFD locks on its backing
// descriptors, under which a flock and an fcntl lock of one process
// conflicted, as they do not on a local file system.

// Who checks permissions depends on who may call. With --allow-other
// (allowOther) the callers are other users too, and the kernel checks
// permissions and caches POSIX ACLs (default_permissions and
// CAP_POSIX_ACL, which turns default_permissions on; naming the option
// shows it in the mount table): the server runs as the user who mounted
// and could not tell its syscalls apart from theirs. The views'
// (.snapshots, .history) stored modes and ACLs are enforced for every
// caller, and the kernel keeps each inode's ACLs (an absent one too)
// from their first read until a change through the mount (a SETXATTR or
// REMOVEXATTR of one, a SETATTR, which may move an ACL's mask) or an
// attribute invalidation from this server (Inode.NotifyContent(-1, 0)).
//
// Without it the kernel refuses every caller but the user who mounted,
// and the mount leaves the checks to the server, as go-fuse's
// loopback does: the live directory checks that user on the server's own
// syscalls, which run as that user, and ACLs are xattrs of the live
// files like others. With default_permissions the kernel checks a
// directory's mode before each name it looks up, creates or removes in
// it, and forgets the directory's attributes after each create, link,
// unlink or rename there: each such change cost one more GETATTR round
// trip, counted with --debug on M3 (an untar of 10,000 files sent 10,000;
// git add+commit of them 62,000; rm -rf 20,500). The cost of leaving the
// checks out: ls -l (coreutils 9.1 asks each file for
// system.posix_acl_access) asks the server for each file's ACL at every
// listing, since the kernel keeps no ACL without CAP_POSIX_ACL; and the
// views let the user who mounted read what their stored modes deny, as
// deltafs cat reads it from the store that user owns. The kernel then
// asks the server before access(2) and chdir(2) (access.go), and the
// server's umask must not take bits from new nodes (umask.go). .snapshots belongs
// to the owner of the live directory's root, so that the user who
// mounted may take, rename and delete snapshots there (see
// liveRootOwner).

// Options returns the go-fuse options the live tree is meant to be
// mounted with, letting other users in or not (allowOther, see above); a
// caller adds the other mount-level choices (read-only, DirectMount).
func Options(allowOther bool) *gofs.Options {
	t, neg := cacheTimeout, liveTimeout
	o := &gofs.Options{
		MountOptions: fuse.MountOptions{
			FsName:     "deltafs",
			Name:       "deltafs",
			MaxWrite:   maxWrite,
			AllowOther: allowOther,
			// With CAP_ATOMIC_O_TRUNC an open with O_TRUNC reaches Open
			// with the flag (go-fuse does not ask for it by default, and
			// then the kernel sends a plain OPEN and a SETATTR of size 0):
			// Open knows the file is written afresh and gives the writer a
			// passthrough handle (see ioMode). M6, 600 O_TRUNC rewrites of
			// 8 MiB, sent every written byte through the server before.
			ExtraCapabilities: killprivV2 | fuse.CAP_ATOMIC_O_TRUNC,
		},
		EntryTimeout:    &t,
		AttrTimeout:     &t,
		NegativeTimeout: &neg, // the live tree's; views opt out (uncachedMiss)
		NullPermissions: true,
	}
	if allowOther {
		o.Options = append(o.Options, "default_permissions")
		o.EnableAcl = true
	}
	return o
}
