package fs

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel applies the creating process's umask to the mode of a new
// file, directory or special file before it asks the mount to make it,
// and the server's syscalls on the live directory applied the server's
// own umask again: with the mount started under umask 077, a process
// with umask 002 made 0600 files instead of 0664. The server cannot drop
// its umask (every thread shares it, the store's files among them), so
// a new node that lost permission bits of the mode the kernel asked for
// gets them back at once. Where the parent has a default ACL, the live
// file system gave the node its mode from that ACL, not from any umask,
// as for a local caller, and the node is left as it is.

// ownerNeeds are the owner's bits a server that is not root needs on a
// file it creates: to give it its FileID (a user.* xattr, which the live
// file system lets only a writer set) and to read it for its revisions.
// git's objects, cp of a read-only file and tar make files 0444 or
// 0400: made so by a user's mount, they went unrecorded. Create makes
// the file with them and then takes away those the caller did not ask
// for, after the FileID is set (root needs neither).
var ownerNeeds = func() uint32 {
	if serverUID != 0 {
		return 0o600
	}
	return 0
}()

// umaskLost returns the permission bits of mode (what the kernel asked
// for) that a node just made in the directory n with permission bits got
// and group gid lacks because of the server's umask, or 0.
func (n *Node) umaskLost(mode, got, gid uint32) uint32 {
	lost := mode & 0o777 &^ got
	if lost == 0 {
		return 0
	}
	if serverUID != 0 && got&syscall.S_ISGID != 0 && !serverInGroup(gid) {
		// A chmod by a server not in the group a setgid directory gave
		// the node would drop its setgid bit, which a local mkdir keeps.
		return 0
	}
	var sz int
	if err := n.inDir(func(p string) (err error) { sz, err = unix.Lgetxattr(p, "system.posix_acl_default", nil); return err }); err == nil && sz > 0 {
		return 0
	}
	return lost
}

// restoreMode gives the node at the live-tree relative path rel the
// permission bits perm (and keeps its special bits special): through fd
// when it is open (>= 0), else through a path descriptor of rel, which
// works for a fifo or a socket too.
func (f *FS) restoreMode(rel string, fd int, perm, special uint32) error {
	mode := perm&0o777 | special&0o7000
	if fd >= 0 {
		return syscall.Fchmod(fd, mode)
	}
	pfd, err := f.openLive(rel, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(pfd)
	return syscall.Chmod(fmt.Sprintf("/proc/self/fd/%d", pfd), mode)
}

// serverGroups are the supplementary groups of the server, asked once.
var serverGroups, _ = os.Getgroups()

// serverInGroup reports whether the server is in group gid, so that its
// chmod of a node of that group keeps the node's setgid bit.
func serverInGroup(gid uint32) bool {
	if gid == serverGID {
		return true
	}
	for _, g := range serverGroups {
		if uint32(g) == gid {
			return true
		}
	}
	return false
}
