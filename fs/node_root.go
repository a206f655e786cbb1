package fs

import (
	"context"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// snapshotsIno is the inode number of .snapshots: far above the inode
// numbers of the live filesystem and below go-fuse's automatic ones.
const snapshotsIno = 1<<62 + 1

// OnAdd gives the root its reserved .snapshots and .history children.
func (n *Node) OnAdd(ctx context.Context) {
	if !n.isRoot() {
		return
	}
	var dir gofs.InodeEmbedder = &snapshotsDir{live: n.fsys.live}
	if n.fsys.snaps != nil {
		d := NewSnapshotsDir(n.fsys.snaps, n.fsys.log)
		d.live = n.fsys.live
		d.v.spillDir, d.v.passthrough = n.fsys.live, n.fsys.passthrough.Load
		dir = d
	}
	snap := n.NewPersistentInode(ctx, dir, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: snapshotsIno})
	n.AddChild(SnapshotsName, snap, false)
	h := newHistoryDir(n.fsys)
	hist := n.NewPersistentInode(ctx, h, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: historyIno})
	h.v.root = hist
	n.AddChild(HistoryName, hist, false)
}

// Lookup finds a child; at the root, .snapshots and .history are ours
// whatever the live directory holds.
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if n.reserved(name) {
		ch := n.GetChild(name)
		var a fuse.AttrOut
		if errno := ch.Operations().(gofs.NodeGetattrer).Getattr(ctx, nil, &a); errno != 0 {
			return nil, errno
		}
		out.Attr = a.Attr
		return ch, 0
	}
	// A miss keeps the zero entry timeout: go-fuse then makes it a
	// negative entry for Options.NegativeTimeout (see cache.go).
	ch, errno := n.lookupLive(ctx, name, out)
	if errno == 0 {
		known := n.GetChild(name) // go-fuse keeps it for ch if it is the same file
		if known == nil || known.StableAttr().Ino != ch.StableAttr().Ino {
			known = ch
		}
		liveEntry(known, out)
	}
	return ch, errno
}

// OpendirHandle lists a directory. The root's listing leaves out
// .snapshots and .history (the reserved ones, and any live file of those
// names, which the mount never shows): like ZFS's .zfs, they are reached
// by name (cd, ls, a path) but not listed, so that du, find, tar, rsync
// and backups of the mount walk the live tree, not every snapshot and
// revision of it once more. (Listed, a du of a 104 MB tree with a few
// snapshots and histories reported 3.4 GB.)
func (n *Node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ds, errno := n.openDirStream()
	if errno != 0 {
		return nil, 0, errno
	}
	if !n.isRoot() {
		var fh gofs.FileHandle = ds
		if d, ok := ds.(dirStream); ok {
			fh = &liveDir{dirStream: d, n: n}
		}
		return fh, 0, 0
	}
	defer ds.Close()
	var ents []fuse.DirEntry
	for ds.HasNext() {
		e, errno := ds.Next()
		if errno != 0 {
			return nil, 0, errno
		}
		if e.Name != SnapshotsName && e.Name != HistoryName {
			ents = append(ents, e)
		}
	}
	return &rootDir{listDir: listDir{ents: ents}, fsys: n.fsys}, 0, 0
}

// rootDir is the root's directory handle: a fixed listing (without the
// reserved names), whose fsync is the live directory's, as every other
// live directory's handle has it (go-fuse's loopback stream): without
// it, fsync of the mount point failed with EOPNOTSUPP, and nothing made
// the names of the root's files durable (a file created there and
// fsynced, an atomic save's rename, were lost at a power cut however
// carefully the program synced).
type rootDir struct {
	listDir
	fsys *FS
}

var _ = (gofs.FileFsyncdirer)((*rootDir)(nil))

func (d *rootDir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.fsys.errno("fsync", syscall.Fsync(d.fsys.dirFd))
}

// withDots returns ents after the "." and ".." entries of directory n (its
// own and its parent's inode numbers; its own at the root): a listing the
// mount makes itself lacks them (go-fuse adds none), where the live
// directories' have them, and "ls -a" shows them.
func withDots(n *gofs.Inode, ents []fuse.DirEntry) []fuse.DirEntry {
	self := n.StableAttr().Ino
	parent := self
	if _, p := n.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	return append([]fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR, Ino: self}, {Name: "..", Mode: syscall.S_IFDIR, Ino: parent}}, ents...)
}

// listDir is a directory handle over a fixed listing.
type listDir struct {
	mu   sync.Mutex
	ents []fuse.DirEntry
	i    int
}

func (d *listDir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.i >= len(d.ents) {
		return nil, 0
	}
	e := d.ents[d.i]
	d.i++
	e.Off = uint64(d.i)
	return &e, 0
}

func (d *listDir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.i = int(min(off, uint64(len(d.ents))))
	return 0
}

// snapshotsDir is the reserved .snapshots directory. Snapshots themselves
// come later; for now it is an empty directory that refuses entries.
type snapshotsDir struct {
	gofs.Inode
	live string
}

func (s *snapshotsDir) fill(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o755
	a.Nlink = 2
	a.Ino = snapshotsIno
	liveRootOwner(s.live, a)
}

// liveRootOwner gives a the owner and group of the live directory's
// root (the mount point's), as .history's root has them: .snapshots is
// the mounting user's, who takes, renames and deletes snapshots in it.
// Where the kernel checks permissions (default_permissions, --allow-other,
// see Options), left to root (0:0), mkdir in .snapshots of a mount by a
// user other than root failed with EACCES before reaching the server.
func liveRootOwner(live string, a *fuse.Attr) {
	var st syscall.Stat_t
	if live != "" && syscall.Lstat(live, &st) == nil {
		a.Uid, a.Gid = st.Uid, st.Gid
	}
}

func (s *snapshotsDir) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	s.fill(&out.Attr)
	return 0
}

func (s *snapshotsDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return gofs.NewListDirStream(nil), 0
}

func (s *snapshotsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.ENOENT
}

// Mkdir will take a snapshot; until snapshots exist it is refused.
func (s *snapshotsDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EOPNOTSUPP
}

func (s *snapshotsDir) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (s *snapshotsDir) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
