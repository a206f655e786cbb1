package crashfs

// The FUSE side of crashfs: each node serves one obj of the model in
// crashfs.go, under the file system's lock.

import (
	"context"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is the go-fuse inode of an obj.
type node struct {
	fs.Inode
	fs *fsys
	o  *obj
}

var (
	_ fs.NodeGetattrer     = (*node)(nil)
	_ fs.NodeSetattrer     = (*node)(nil)
	_ fs.NodeLookuper      = (*node)(nil)
	_ fs.NodeReaddirer     = (*node)(nil)
	_ fs.NodeCreater       = (*node)(nil)
	_ fs.NodeMkdirer       = (*node)(nil)
	_ fs.NodeUnlinker      = (*node)(nil)
	_ fs.NodeRmdirer       = (*node)(nil)
	_ fs.NodeRenamer       = (*node)(nil)
	_ fs.NodeLinker        = (*node)(nil)
	_ fs.NodeOpener        = (*node)(nil)
	_ fs.NodeReader        = (*node)(nil)
	_ fs.NodeWriter        = (*node)(nil)
	_ fs.NodeFsyncer       = (*node)(nil)
	_ fs.NodeAllocater     = (*node)(nil)
	_ fs.NodeGetxattrer    = (*node)(nil)
	_ fs.NodeSetxattrer    = (*node)(nil)
	_ fs.NodeListxattrer   = (*node)(nil)
	_ fs.NodeRemovexattrer = (*node)(nil)
	_ fs.NodeStatfser      = (*node)(nil)
)

// lock takes the file system's lock for a change: EIO after a crash.
func (n *node) lock() syscall.Errno {
	n.fs.mu.Lock()
	if n.fs.crashed {
		n.fs.mu.Unlock()
		return syscall.EIO
	}
	return 0
}

func (n *node) unlock() { n.fs.mu.Unlock() }

func (n *node) child(ctx context.Context, o *obj, out *fuse.EntryOut) *fs.Inode {
	o.fillAttr(&out.Attr)
	mode := uint32(syscall.S_IFREG)
	if o.dir {
		mode = syscall.S_IFDIR
	}
	return n.NewInode(ctx, &node{fs: n.fs, o: o}, fs.StableAttr{Mode: mode, Ino: o.ino})
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	n.o.fillAttr(&out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if sz, ok := in.GetSize(); ok {
		if n.o.dir {
			return syscall.EISDIR
		}
		n.o.resize(int64(sz))
	}
	if m, ok := in.GetMode(); ok {
		n.o.mode = m & 0o7777
	}
	if t, ok := in.GetMTime(); ok {
		n.o.mtime = t
	}
	n.o.fillAttr(&out.Attr)
	return 0
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	o, ok := n.o.ents[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return n.child(ctx, o, out), 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	var es []fuse.DirEntry
	for name, o := range n.o.ents {
		mode := uint32(syscall.S_IFREG)
		if o.dir {
			mode = syscall.S_IFDIR
		}
		es = append(es, fuse.DirEntry{Name: name, Mode: mode, Ino: o.ino})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return fs.NewListDirStream(es), 0
}

func (n *node) openFlags(flags uint32) syscall.Errno {
	if n.fs.opt.RefuseDirectIO && flags&syscall.O_DIRECT != 0 {
		return syscall.EINVAL
	}
	return 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.openFlags(flags); e != 0 {
		return nil, nil, 0, e
	}
	if e := n.lock(); e != 0 {
		return nil, nil, 0, e
	}
	defer n.unlock()
	if o, ok := n.o.ents[name]; ok {
		if flags&syscall.O_EXCL != 0 {
			return nil, nil, 0, syscall.EEXIST
		}
		if o.dir {
			return nil, nil, 0, syscall.EISDIR
		}
		if flags&syscall.O_TRUNC != 0 {
			o.resize(0)
		}
		return n.child(ctx, o, out), nil, 0, 0
	}
	o := n.fs.newFile(mode)
	o.nlink = 1
	n.o.ents[name] = o
	n.o.mtime = time.Now()
	return n.child(ctx, o, out), nil, 0, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	if _, ok := n.o.ents[name]; ok {
		return nil, syscall.EEXIST
	}
	o := n.fs.newDir(mode)
	o.nlink = 1
	n.o.ents[name] = o
	return n.child(ctx, o, out), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	o, ok := n.o.ents[name]
	if !ok {
		return syscall.ENOENT
	}
	if o.dir {
		return syscall.EISDIR
	}
	delete(n.o.ents, name)
	o.nlink--
	return 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	o, ok := n.o.ents[name]
	if !ok {
		return syscall.ENOENT
	}
	if !o.dir {
		return syscall.ENOTDIR
	}
	if len(o.ents) > 0 {
		return syscall.ENOTEMPTY
	}
	delete(n.o.ents, name)
	o.nlink--
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	n.fs.stats.Renames++
	to := newParent.(*node).o
	o, ok := n.o.ents[name]
	if !ok {
		return syscall.ENOENT
	}
	old, exists := to.ents[newName]
	switch {
	case flags&unix.RENAME_EXCHANGE != 0:
		if !exists {
			return syscall.ENOENT
		}
		n.o.ents[name], to.ents[newName] = old, o
		return 0
	case flags&unix.RENAME_NOREPLACE != 0 && exists:
		return syscall.EEXIST
	case flags&^uint32(unix.RENAME_NOREPLACE) != 0:
		return syscall.EINVAL
	}
	if exists {
		if old == o {
			return 0
		}
		switch {
		case old.dir && !o.dir:
			return syscall.EISDIR
		case !old.dir && o.dir:
			return syscall.ENOTDIR
		case old.dir && len(old.ents) > 0:
			return syscall.ENOTEMPTY
		}
		old.nlink--
	}
	delete(n.o.ents, name)
	to.ents[newName] = o
	return 0
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	o := target.(*node).o
	if o.dir {
		return nil, syscall.EPERM
	}
	if _, ok := n.o.ents[name]; ok {
		return nil, syscall.EEXIST
	}
	n.o.ents[name] = o
	o.nlink++
	return n.child(ctx, o, out), 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := n.openFlags(flags); e != 0 {
		return nil, 0, e
	}
	if flags&syscall.O_TRUNC != 0 {
		if e := n.lock(); e != 0 {
			return nil, 0, e
		}
		defer n.unlock()
		n.o.resize(0)
	}
	return nil, 0, 0
}

func (n *node) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	k := n.o.readAt(dest, off)
	return fuse.ReadResultData(dest[:k]), 0
}

func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return 0, e
	}
	defer n.unlock()
	n.fs.stats.Writes++
	n.o.writeAt(data, off)
	n.o.mtime = time.Now()
	return uint32(len(data)), 0
}

// Fsync is a file's fsync or fdatasync, and a directory's (go-fuse
// sends FSYNCDIR here).
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if n.o.dir {
		n.fs.stats.DirFsyncs++
		n.fs.syncDir(n.o)
	} else {
		n.fs.syncFile(n.o)
	}
	if n.fs.opt.Model == Ext4Like {
		for d := range n.fs.dirs {
			n.fs.syncDir(d)
		}
	}
	return 0
}

func (n *node) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if n.o.dir {
		return syscall.EISDIR
	}
	end := int64(off + size)
	switch mode {
	case 0:
		if end > n.o.size {
			n.o.resize(end)
		}
	case unix.FALLOC_FL_KEEP_SIZE:
		// blocks are not modelled
	case unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE:
		n.o.zero(int64(off), int64(size))
	case unix.FALLOC_FL_ZERO_RANGE:
		n.o.zero(int64(off), int64(size))
		if end > n.o.size {
			n.o.resize(end)
		}
	default:
		return syscall.EOPNOTSUPP
	}
	return 0
}

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	v, ok := n.o.xattr[attr]
	if !ok {
		return 0, syscall.ENODATA
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	_, ok := n.o.xattr[attr]
	switch {
	case flags&unix.XATTR_CREATE != 0 && ok:
		return syscall.EEXIST
	case flags&unix.XATTR_REPLACE != 0 && !ok:
		return syscall.ENODATA
	}
	if n.o.xattr == nil {
		n.o.xattr = map[string][]byte{}
	}
	n.o.xattr[attr] = slices.Clone(data)
	return 0
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if _, ok := n.o.xattr[attr]; !ok {
		return syscall.ENODATA
	}
	delete(n.o.xattr, attr)
	return 0
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	var b []byte
	names := make([]string, 0, len(n.o.xattr))
	for k := range n.o.xattr {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b = append(append(b, k...), 0)
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// Statfs reports 64 GiB free, so that a store's free-space checks pass.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	const blocks = 16 << 20 // of 4 KiB
	out.Blocks, out.Bfree, out.Bavail = blocks, blocks, blocks
	out.Files, out.Ffree = 1<<20, 1<<20
	out.Bsize, out.Frsize, out.NameLen = 4096, 4096, 255
	return 0
}
