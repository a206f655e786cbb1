package fs

import (
	"context"
	"golang.org/x/sys/unix"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The .history tree mirrors the live tree: .history itself stands for
// the live root, a directory under it for the live directory of the same
// path (histDir), and a live regular file's name for a directory of its
// revisions (histFile, history_file.go), named so that ls sorts them in
// order (see revName). Symlinks and special files have no history and
// are not shown. Everything in it is read-only (EROFS).
//
// The nodes keep no path of their own: a node's live path is its path
// below .history in go-fuse's tree, which follows the latest lookup, so
// a node that go-fuse reuses for a renamed live inode serves the new
// path. Nothing is cached but what the kernel caches for cacheTimeout, as
// for the live tree: listing a directory reads the live directory,
// listing a file's revisions asks History for that one file's.

// histView is what every node under .history shares.
type histView struct {
	fsys *FS
	hist History // nil: no file has any revision
	log  *slog.Logger
	root *gofs.Inode // the .history inode
}

// livePath returns the live path that node n of .history stands for.
// openLive opens n's live counterpart with flags, no symlink followed on
// the way (FS.openLive): a directory a user swapped for a symlink while
// holding its .history mirror open listed the directory it led to.
func (v *histView) openLive(n *gofs.Inode, flags int) (int, error) {
	rel := "."
	if n != v.root {
		rel = n.Path(v.root)
	}
	return v.fsys.openLive(rel, flags, 0)
}

func (v *histView) livePath(n *gofs.Inode) string {
	if n == v.root {
		return v.fsys.live
	}
	return filepath.Join(v.fsys.live, n.Path(v.root))
}

// histReadOnly refuses every change to a node of .history (and syncs
// nothing).
type histReadOnly struct{ nothingToSync }

func (histReadOnly) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (histReadOnly) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (histReadOnly) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return syscall.EROFS
}

func (histReadOnly) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, absentXattr(attr)
}

func (histReadOnly) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, 0
}

// histNoChange refuses every change to the entries of a directory of
// .history.
type histNoChange struct {
	histReadOnly
	noNewEntries
}

func (histNoChange) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (histNoChange) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (histNoChange) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (histNoChange) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

// histDir is .history or the mirror of a live directory under it.
type histDir struct {
	gofs.Inode
	histNoChange
	v *histView
}

var (
	_ = (gofs.NodeGetattrer)((*histDir)(nil))
	_ = (gofs.NodeSetattrer)((*histDir)(nil))
	_ = (gofs.NodeLookuper)((*histDir)(nil))
	_ = (gofs.NodeOpendirHandler)((*histDir)(nil))
	_ = (gofs.NodeMkdirer)((*histDir)(nil))
	_ = (gofs.NodeCreater)((*histDir)(nil))
	_ = (gofs.NodeMknoder)((*histDir)(nil))
	_ = (gofs.NodeFsyncer)((*histDir)(nil))
	_ = (gofs.NodeSymlinker)((*histDir)(nil))
	_ = (gofs.NodeLinker)((*histDir)(nil))
	_ = (gofs.NodeUnlinker)((*histDir)(nil))
	_ = (gofs.NodeRmdirer)((*histDir)(nil))
	_ = (gofs.NodeRenamer)((*histDir)(nil))
	_ = (gofs.NodeSetxattrer)((*histDir)(nil))
	_ = (gofs.NodeRemovexattrer)((*histDir)(nil))
)

// newHistoryDir returns the .history directory of fsys.
func newHistoryDir(fsys *FS) *histDir {
	return &histDir{v: &histView{fsys: fsys, hist: fsys.hist, log: fsys.log}}
}

// histAttr fills a with the attributes of a .history directory standing
// for the live node st: read-only, searchable where readable. A file's
// directory of revisions is its owner's only (dr-x------): the store keeps
// no mode per revision, and the live file's current mode says nothing of
// who could read an old one (written 0600, later made 0644).
func histAttr(st *syscall.Stat_t, ino uint64, a *fuse.Attr) {
	perm := st.Mode & 0o444
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		perm = 0o400
	}
	a.Mode = syscall.S_IFDIR | perm | perm>>2
	a.Ino = ino
	a.Nlink = 2
	a.Uid, a.Gid = st.Uid, st.Gid
	a.Blksize = 4096
	mt, ct := time.Unix(st.Mtim.Unix()), time.Unix(st.Ctim.Unix())
	a.SetTimes(&mt, &mt, &ct)
}

func (d *histDir) ino(st *syscall.Stat_t) uint64 {
	if d.EmbeddedInode() == d.v.root {
		return historyIno
	}
	return histIno(histKindDir, st.Ino)
}

func (d *histDir) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var st syscall.Stat_t
	fd, err := d.v.openLive(d.EmbeddedInode(), unix.O_PATH)
	if err == nil {
		err = syscall.Fstat(fd, &st)
		syscall.Close(fd)
	}
	if err != nil {
		return toErrno(d.v.log, "history getattr", err)
	}
	histAttr(&st, d.ino(&st), &out.Attr)
	return 0
}

// Lookup finds the mirror of a live directory or the revisions of a live
// file.
func (d *histDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer uncachedMiss(out, &errno) // names appear with the live tree's
	if d.EmbeddedInode() == d.v.root && (name == SnapshotsName || name == HistoryName) {
		return nil, syscall.ENOENT
	}
	var st syscall.Stat_t
	dfd, err := d.v.openLive(d.EmbeddedInode(), unix.O_PATH|syscall.O_DIRECTORY)
	if err == nil {
		err = lstatAt(dfd, name, &st)
		syscall.Close(dfd)
	}
	if err != nil {
		return nil, toErrno(d.v.log, "history lookup", err)
	}
	var op gofs.InodeEmbedder
	var ino uint64
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		op, ino = &histDir{v: d.v}, histIno(histKindDir, st.Ino)
	case syscall.S_IFREG:
		op, ino = &histFile{v: d.v}, histIno(histKindFile, st.Ino)
	default:
		return nil, syscall.ENOENT // no history
	}
	histAttr(&st, ino, &out.Attr)
	out.SetEntryTimeout(cacheTimeout)
	out.SetAttrTimeout(cacheTimeout)
	return d.NewInode(ctx, op, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino}), 0
}

// OpendirHandle lists the live directory's directories and regular files
// (all shown as directories) into a handle that declines READDIRPLUS's
// lookups, as .snapshots does: a plain ls then costs one readdir of the
// live directory, not an lstat and a node per entry.
func (d *histDir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	dfd, err := d.v.openLive(d.EmbeddedInode(), syscall.O_RDONLY|syscall.O_DIRECTORY)
	if err != nil {
		return nil, 0, toErrno(d.v.log, "history list", err)
	}
	ds, errno := gofs.NewLoopbackDirStreamFd(dfd)
	if errno != 0 {
		syscall.Close(dfd)
		return nil, 0, errno
	}
	defer ds.Close() // and dfd
	atRoot := d.EmbeddedInode() == d.v.root
	var ents []fuse.DirEntry
	for ds.HasNext() {
		e, errno := ds.Next()
		if errno != 0 {
			return nil, 0, errno
		}
		if e.Name == "." || e.Name == ".." || atRoot && (e.Name == SnapshotsName || e.Name == HistoryName) {
			continue
		}
		kind := histKindOf(dfd, e)
		if kind == 0 {
			continue
		}
		ents = append(ents, fuse.DirEntry{Name: e.Name, Mode: syscall.S_IFDIR, Ino: histIno(kind, e.Ino)})
	}
	return &plainListHandle{listDir: listDir{ents: withDots(d.EmbeddedInode(), ents)}}, 0, 0
}

// histKindOf returns the kind of node a live directory entry shows as
// under .history, 0 for none; it stats only entries whose type the
// directory did not give.
func histKindOf(dfd int, e fuse.DirEntry) uint64 {
	mode := e.Mode & syscall.S_IFMT
	if mode == 0 {
		var st syscall.Stat_t
		if lstatAt(dfd, e.Name, &st) != nil {
			return 0
		}
		mode = st.Mode & syscall.S_IFMT
	}
	switch mode {
	case syscall.S_IFDIR:
		return histKindDir
	case syscall.S_IFREG:
		return histKindFile
	}
	return 0
}
