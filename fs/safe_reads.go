package fs

import (
	"context"
	"syscall"
	"unsafe"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The live tree's reads the kernel and the recorder rely on (lookups,
// attributes, FileIDs, listings), through descriptors opened with no
// symlink on the way, as its changes are (safe_ops.go).

// lookupLive is go-fuse's LoopbackNode.Lookup through n's descriptor:
// the attributes the kernel checks permissions against (with
// --allow-other) and keeps are those of name in n, never of a file a
// swapped symlink leads to.
func (n *Node) lookupLive(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	dfd, err := n.openDir()
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	defer syscall.Close(dfd)
	return n.lookupAt(ctx, dfd, name, out)
}

// lookupAt is lookupLive with n's descriptor dfd open.
func (n *Node) lookupAt(ctx context.Context, dfd int, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	st, attr, err := n.fsys.statStableAt(dfd, name, unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	out.Attr.FromStat(&st)
	return n.NewInode(ctx, n.fsys.newNode(nil, n.EmbeddedInode(), name, &st), attr), 0
}

// getattrLive is go-fuse's LoopbackNode.Getattr, through n's descriptor
// when the call carries no handle.
func (n *Node) getattrLive(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if fga, ok := f.(gofs.FileGetattrer); ok && fga != nil {
		return n.LoopbackNode.Getattr(ctx, f, out)
	}
	fd, err := n.openSelf()
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	out.FromStat(&st)
	return 0
}

// childStat stats name in directory n, no symlink followed on the way.
func (n *Node) childStat(name string, st *syscall.Stat_t) error {
	dfd, err := n.openDir()
	if err != nil {
		return err
	}
	defer syscall.Close(dfd)
	return lstatAt(dfd, name, st)
}

// lstatAt is fstatat(2) of name in directory dfd, not following it.
func lstatAt(dfd int, name string, st *syscall.Stat_t) error {
	var ust unix.Stat_t
	if err := unix.Fstatat(dfd, name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	*st = *(*syscall.Stat_t)(unsafe.Pointer(&ust)) // the same kernel struct stat
	return nil
}

// readIDSafe is readID of n's live file, reached through its directory's
// descriptor (inDir).
func (n *Node) readIDSafe() FileID {
	var id FileID
	_ = n.inDir(func(p string) error { id = readID(p); return nil })
	return id
}

// pathFdID is the FileID of the regular file fd (opened O_PATH, which
// fgetxattr refuses) refers to, read through its /proc/self/fd link.
func pathFdID(fd int) FileID {
	var id FileID
	if sz, err := unix.Getxattr(procFd(fd), XattrID, id[:]); err != nil || sz != len(id) {
		return FileID{}
	}
	return id
}

// openDirStream is go-fuse's loopback directory stream of n, opened with
// no symlink on the way (a directory swapped for a symlink listed the
// directory it led to: names outside the tree).
func (n *Node) openDirStream() (gofs.DirStream, syscall.Errno) {
	fd, err := n.openSelfAs(syscall.O_RDONLY | syscall.O_DIRECTORY)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	return gofs.NewLoopbackDirStreamFd(fd)
}

// childStatID stats name in directory n and, for a regular file, reads
// its FileID, both through one descriptor opened with no symlink on the
// way: two lookups by path let a swap between them pair one file's owner
// with another's FileID (the owner decides whether a history goes on
// into a new file).
func (n *Node) childStatID(name string, st *syscall.Stat_t) (FileID, error) {
	dfd, err := n.openDir()
	if err != nil {
		return FileID{}, err
	}
	defer syscall.Close(dfd)
	fd, err := OpenBeneath(dfd, name, unix.O_PATH, 0)
	if err != nil {
		return FileID{}, err
	}
	defer syscall.Close(fd)
	if err := syscall.Fstat(fd, st); err != nil {
		return FileID{}, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return FileID{}, nil
	}
	return pathFdID(fd), nil
}
