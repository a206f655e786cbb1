package fs

import (
	"context"
	"path"
	"strconv"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The live tree's changes, made through descriptors opened with no
// symlink on the way (openLive), never by a path string the kernel
// resolves again. go-fuse's loopback changes the backing tree by path:
// with --allow-other, a user who swaps a symlink in for a file or one of
// its directories between the kernel's lookup and the server's call made
// a server running as root truncate, chmod, chown, remove or create
// files outside the tree (a review truncated a root-owned file so, from
// an unprivileged account). Here a change of a node goes through a
// descriptor of it, and a change of a name through one of its directory
// and the *at(2) call; a symlink met on the way is an error (ELOOP),
// which only such a swap makes.

// procFd is the path that reaches the file fd refers to itself: a path
// syscall given it follows no symlink of the tree.
func procFd(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// openSelf opens n with O_PATH and no symlink followed (n itself, if a
// symlink, is opened as one).
func (n *Node) openSelf() (int, error) {
	rel := n.relPath()
	if rel == "" && !n.isRoot() {
		return -1, syscall.ENOENT // unlinked
	}
	return n.fsys.openLive(rel, unix.O_PATH, 0)
}

// openDir opens directory n with O_PATH, no symlink followed: the
// directory the *at calls of a change of its entries are made in.
func (n *Node) openDir() (int, error) {
	rel := n.relPath()
	if rel == "" && !n.isRoot() {
		return -1, syscall.ENOENT // removed
	}
	return n.fsys.openLive(rel, unix.O_PATH|syscall.O_DIRECTORY, 0)
}

// setattrLive is go-fuse's LoopbackNode.Setattr through a descriptor of
// the live file when the call carries no handle (see above): chmod,
// chown, truncate and utimens in that order, then its attributes.
func (n *Node) setattrLive(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if fsa, ok := f.(gofs.FileSetattrer); ok && fsa != nil {
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	}
	fd, err := n.openSelf()
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer syscall.Close(fd)
	p := procFd(fd)
	if m, ok := in.GetMode(); ok {
		if err := syscall.Chmod(p, m); err != nil {
			return gofs.ToErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		suid, sgid := -1, -1
		if uok {
			suid = int(uid)
		}
		if gok {
			sgid = int(gid)
		}
		if err := unix.Fchownat(fd, "", suid, sgid, unix.AT_EMPTY_PATH); err != nil {
			return gofs.ToErrno(err)
		}
	}
	if sz, ok := in.GetSize(); ok { // before the times: a truncation moves the mtime
		if err := syscall.Truncate(p, int64(sz)); err != nil {
			return gofs.ToErrno(err)
		}
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		var err error
		if aok {
			if ts[0], err = unix.TimeToTimespec(atime); err != nil {
				return gofs.ToErrno(err)
			}
		}
		if mok {
			if ts[1], err = unix.TimeToTimespec(mtime); err != nil {
				return gofs.ToErrno(err)
			}
		}
		if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
			return gofs.ToErrno(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	out.FromStat(&st)
	return 0
}

// unlinkLive removes name from directory n (flags: unix.AT_REMOVEDIR for
// a directory).
func (n *Node) unlinkLive(name string, flags int) syscall.Errno {
	dfd, err := n.openDir()
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer syscall.Close(dfd)
	return gofs.ToErrno(unix.Unlinkat(dfd, name, flags))
}

// renameLive renames name in n to newName in np (renameat2 flags).
func (n *Node) renameLive(name string, np *Node, newName string, flags uint32) syscall.Errno {
	from, err := n.openDir()
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer syscall.Close(from)
	to, err := np.openDir()
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer syscall.Close(to)
	return gofs.ToErrno(unix.Renameat2(from, name, to, newName, uint(flags)))
}

// makeLive makes name in directory n with mk (mkdirat, mknodat or
// symlinkat on n's descriptor; or a link), gives a node it made (owned)
// to its caller as go-fuse's loopback does for a server run as root, and
// looks it up. undo removes it should the lookup fail.
func (n *Node) makeLive(ctx context.Context, name string, out *fuse.EntryOut, mk func(dfd int) error, undo int, owned bool) (*gofs.Inode, syscall.Errno) {
	dfd, err := n.openDir()
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	defer syscall.Close(dfd)
	if err := mk(dfd); err != nil {
		return nil, gofs.ToErrno(err)
	}
	if caller, ok := fuse.FromContext(ctx); ok && owned && serverUID == 0 {
		_ = chownNew(dfd, name, int(caller.Uid), int(caller.Gid))
	}
	ch, errno := n.lookupAt(ctx, dfd, name, out)
	if errno != 0 {
		_ = unix.Unlinkat(dfd, name, undo)
	}
	return ch, errno
}

// mkdirLive is go-fuse's LoopbackNode.Mkdir through n's descriptor.
func (n *Node) mkdirLive(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.makeLive(ctx, name, out, func(dfd int) error { return unix.Mkdirat(dfd, name, mode) }, unix.AT_REMOVEDIR, true)
}

// mknodLive is go-fuse's LoopbackNode.Mknod through n's descriptor.
func (n *Node) mknodLive(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.makeLive(ctx, name, out, func(dfd int) error { return unix.Mknodat(dfd, name, mode, int(rdev)) }, 0, true)
}

// symlinkLive is go-fuse's LoopbackNode.Symlink through n's descriptor.
func (n *Node) symlinkLive(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.makeLive(ctx, name, out, func(dfd int) error { return unix.Symlinkat(target, dfd, name) }, 0, true)
}

// inDir calls fn with a path that reaches n itself through a descriptor
// of its directory opened with no symlink on the way
// ("/proc/self/fd/D/NAME", or ".../D/." for the root): a call that
// follows no final symlink (the l* calls, AT_SYMLINK_NOFOLLOW) then
// acts on n, whatever was swapped in above it.
func (n *Node) inDir(fn func(p string) error) error {
	rel := n.relPath()
	var dfd int
	var err error
	name := "."
	switch {
	case n.isRoot():
		dfd, err = n.fsys.openLive(".", unix.O_PATH|syscall.O_DIRECTORY, 0)
	case rel == "":
		return syscall.ENOENT // unlinked
	default:
		dir := path.Dir(rel)
		name = path.Base(rel)
		dfd, err = n.fsys.openLive(dir, unix.O_PATH|syscall.O_DIRECTORY, 0)
	}
	if err != nil {
		return err
	}
	defer syscall.Close(dfd)
	return fn(procFd(dfd) + "/" + name)
}

// linkLive is go-fuse's LoopbackNode.Link through descriptors: t's own
// (linked through its /proc/self/fd link, which needs no capability,
// where AT_EMPTY_PATH does) and n's.
func (n *Node) linkLive(ctx context.Context, t *Node, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if _, parent := t.Parent(); parent == nil {
		return nil, syscall.EXDEV // no name to link from (go-fuse's rule)
	}
	tfd, err := t.openSelf()
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	defer syscall.Close(tfd)
	if _, attr, err := n.fsys.fstatStable(tfd); err != nil || attr.Ino != t.StableAttr().Ino {
		return nil, syscall.ENOENT // another file at t's path now (moved meanwhile)
	}
	return n.makeLive(ctx, name, out, func(dfd int) error {
		return unix.Linkat(unix.AT_FDCWD, procFd(tfd), dfd, name, unix.AT_SYMLINK_FOLLOW)
	}, 0, false)
}

// openSelfAs opens n with flags, no symlink followed on the way (nor n
// itself, if one: ELOOP).
func (n *Node) openSelfAs(flags int) (int, error) {
	rel := n.relPath()
	if rel == "" && !n.isRoot() {
		return -1, syscall.ENOENT // unlinked
	}
	return n.fsys.openLive(rel, flags, 0)
}

// chownNew gives name in directory dfd, a node just made, to uid and gid
// (-1: unchanged) through a descriptor of it, if it still is such a
// node: one with a single link, or a directory (which takes no hard
// link). By name, a hard link swapped in between the make and the chown
// (with fs.protected_hardlinks off) had root chown the file it links
// to (a code review; go-fuse's loopback has the same window).
func chownNew(dfd int, name string, uid, gid int) error {
	return withNew(dfd, name, func(fd int) error { return unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH) })
}

// withNew calls fn with an O_PATH descriptor of name in dfd if it is a
// node just made (see chownNew), else returns EEXIST.
func withNew(dfd int, name string, fn func(fd int) error) error {
	fd, err := OpenBeneath(dfd, name, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR && st.Nlink != 1 {
		return syscall.EEXIST
	}
	return fn(fd)
}
