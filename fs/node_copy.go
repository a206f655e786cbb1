package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// CopyFileRange copies between two open live files in the kernel and
// notes, in the destination's session, the range written and the source
// (a recorder may make it a second parent: "cp a b").
func (n *Node) CopyFileRange(ctx context.Context, fhIn gofs.FileHandle, offIn uint64, out *gofs.Inode,
	fhOut gofs.FileHandle, offOut uint64, size uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok1 := fhIn.(fdHolder)
	o, ok2 := fhOut.(fdHolder)
	dst, ok3 := out.Operations().(*Node)
	if !ok1 || !ok2 || !ok3 {
		return 0, syscall.EXDEV
	}
	if errno := dst.dirtying(ctx); errno != 0 {
		return 0, errno
	}
	n.fsys.hold() // after the wait of dirtying (freeze.go)
	defer n.fsys.unhold()
	oi, oo := int64(offIn), int64(offOut)
	cnt, err := unix.CopyFileRange(in.liveFd(), &oi, o.liveFd(), &oo, int(size), int(flags))
	if err != nil {
		return 0, n.fsys.errno("copy_file_range", err)
	}
	if cnt > 0 {
		src := FileRef{Path: n.relPath(), ID: fdReadID(in.liveFd())}
		dst.copied(int64(offOut), int64(cnt), src)
	}
	return uint32(cnt), 0
}

// copied notes cnt bytes written at off by a copy from src.
func (n *Node) copied(off, cnt int64, src FileRef) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sess == nil {
		return
	}
	n.dirtyingLocked()
	n.sess.wrote(off, cnt)
	for _, s := range n.sess.sources {
		if s.ID == src.ID && s.Path == src.Path {
			return
		}
	}
	n.sess.sources = append(n.sess.sources, src)
}

// fdReadID returns the FileID of an open live file without assigning one.
func fdReadID(fd int) FileID {
	var id FileID
	if sz, err := unix.Fgetxattr(fd, XattrID, id[:]); err != nil || sz != len(id) {
		return FileID{}
	}
	return id
}
