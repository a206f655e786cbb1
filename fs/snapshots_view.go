package fs

import (
	"context"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Inside a snapshot nothing changes, so the kernel may cache entries and
// attributes for long.
const viewTimeout = time.Hour

// maxCachedTrees bounds the decoded trees a mount keeps for lookups in
// snapshots (a tree is a directory listing: a few KiB each).
const maxCachedTrees = 4096

// view is what every node of every snapshot shares.
type view struct {
	snaps Snapshots
	log   *slog.Logger
	// spillDir is where big texts are spilled while open (spill.go; ""
	// keeps them in memory), and passthrough says whether the mount
	// may hand their reads to the kernel.
	spillDir    string
	passthrough func() bool

	mu    sync.Mutex
	trees map[index.TreeHash]*index.Tree
}

func (v *view) tree(ctx context.Context, h index.TreeHash) (*index.Tree, error) {
	v.mu.Lock()
	t, ok := v.trees[h]
	v.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := v.snaps.Tree(ctx, h)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	if len(v.trees) >= maxCachedTrees {
		for k := range v.trees { // drop an arbitrary one
			delete(v.trees, k)
			break
		}
	}
	v.trees[h] = t
	v.mu.Unlock()
	return t, nil
}

// newNode makes the node of entry e of snapshot s.
func (v *view) newNode(ctx context.Context, parent *gofs.Inode, s index.SnapshotID, e index.TreeEntry) *gofs.Inode {
	var op gofs.InodeEmbedder
	switch {
	case e.IsDir():
		op = &viewDir{viewNode: viewNode{v: v, snap: s, e: e}}
	case e.IsRegular():
		op = &viewFile{viewNode: viewNode{v: v, snap: s, e: e}}
	case e.IsSymlink():
		op = &viewLink{viewNode: viewNode{v: v, snap: s, e: e}}
	default:
		op = &viewNode{v: v, snap: s, e: e}
	}
	return parent.NewInode(ctx, op, gofs.StableAttr{Mode: e.Mode & syscall.S_IFMT, Ino: viewIno(s, e.Ino)})
}

// viewNode is any node inside a snapshot: attributes and xattrs as they
// were, every change refused with EROFS.
type viewNode struct {
	gofs.Inode
	nothingToSync
	v    *view
	snap index.SnapshotID
	e    index.TreeEntry
}

var (
	_ = (gofs.NodeGetattrer)((*viewNode)(nil))
	_ = (gofs.NodeSetattrer)((*viewNode)(nil))
	_ = (gofs.NodeGetxattrer)((*viewNode)(nil))
	_ = (gofs.NodeListxattrer)((*viewNode)(nil))
	_ = (gofs.NodeSetxattrer)((*viewNode)(nil))
	_ = (gofs.NodeRemovexattrer)((*viewNode)(nil))
	_ = (gofs.NodeFsyncer)((*viewNode)(nil))
	_ = (gofs.NodeLookuper)((*viewDir)(nil))
	_ = (gofs.NodeReaddirer)((*viewDir)(nil))
	_ = (gofs.NodeMkdirer)((*viewDir)(nil))
	_ = (gofs.NodeCreater)((*viewDir)(nil))
	_ = (gofs.NodeUnlinker)((*viewDir)(nil))
	_ = (gofs.NodeRmdirer)((*viewDir)(nil))
	_ = (gofs.NodeRenamer)((*viewDir)(nil))
	_ = (gofs.NodeSymlinker)((*viewDir)(nil))
	_ = (gofs.NodeLinker)((*viewDir)(nil))
	_ = (gofs.NodeMknoder)((*viewDir)(nil))
	_ = (gofs.NodeOpener)((*viewFile)(nil))
	_ = (gofs.NodeReader)((*viewFile)(nil))
	_ = (gofs.NodeReadlinker)((*viewLink)(nil))
)

func fillAttr(s index.SnapshotID, e *index.TreeEntry, a *fuse.Attr) {
	a.Ino = viewIno(s, e.Ino)
	a.Mode = e.Mode
	a.Nlink = e.Nlink
	a.Uid, a.Gid = e.UID, e.GID
	a.Size = e.Size
	a.Rdev = uint32(e.Rdev)
	a.Blksize = 4096
	a.Blocks = (e.Size + 511) / 512
	at, mt, ct := time.Unix(0, e.Atime), time.Unix(0, e.Mtime), time.Unix(0, e.Ctime)
	a.SetTimes(&at, &mt, &ct)
}

func (n *viewNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillAttr(n.snap, &n.e, &out.Attr)
	out.SetTimeout(viewTimeout)
	return 0
}

func (n *viewNode) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (n *viewNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if sz, errno, ok := n.exclusiveXattr(ctx, attr, dest); ok {
		return sz, errno
	}
	for _, x := range n.e.Xattrs {
		if x.Name == attr {
			if len(dest) < len(x.Value) {
				return uint32(len(x.Value)), syscall.ERANGE
			}
			return uint32(copy(dest, x.Value)), 0
		}
	}
	return 0, absentXattr(attr)
}

func (n *viewNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var list []byte
	for _, x := range n.e.Xattrs {
		list = append(append(list, x.Name...), 0)
	}
	list = listedTo(ctx, list)
	if len(dest) < len(list) {
		return uint32(len(list)), syscall.ERANGE
	}
	return uint32(copy(dest, list)), 0
}

func (n *viewNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (n *viewNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return syscall.EROFS
}
