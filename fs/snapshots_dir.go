package fs

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// SnapshotsDir is the .snapshots directory: one read-only directory per
// snapshot. mkdir takes a snapshot, rmdir deletes one, rename renames one
// (within .snapshots only), readdir lists them; nothing else may be
// created in it.
type SnapshotsDir struct {
	gofs.Inode
	noNewEntries
	nothingToSync
	v     *view
	start time.Time // when it was made: its times until a snapshot changes
	live  string    // the live directory, whose root's owner it takes (liveRootOwner); "" in tests: root's
}

var (
	_ = (gofs.NodeLookuper)((*SnapshotsDir)(nil))
	_ = (gofs.NodeReaddirer)((*SnapshotsDir)(nil))
	_ = (gofs.NodeMkdirer)((*SnapshotsDir)(nil))
	_ = (gofs.NodeRmdirer)((*SnapshotsDir)(nil))
	_ = (gofs.NodeRenamer)((*SnapshotsDir)(nil))
	_ = (gofs.NodeCreater)((*SnapshotsDir)(nil))
	_ = (gofs.NodeGetattrer)((*SnapshotsDir)(nil))
	_ = (gofs.NodeSetattrer)((*SnapshotsDir)(nil))
	_ = (gofs.NodeFsyncer)((*SnapshotsDir)(nil))
)

// NewSnapshotsDir returns the .snapshots directory over s; log receives
// the log lines of failed operations (nil discards).
func NewSnapshotsDir(s Snapshots, log *slog.Logger) *SnapshotsDir {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &SnapshotsDir{v: &view{snaps: s, log: log, trees: map[index.TreeHash]*index.Tree{}}, start: time.Now()}
}

// Getattr gives .snapshots the time of the last change to the list of
// snapshots (see SnapshotsChanged), or of its own making, as its
// modification, change and access times, and the owner of the live
// directory's root.
func (d *SnapshotsDir) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o755
	out.Nlink = 2
	out.Ino = d.StableAttr().Ino
	liveRootOwner(d.live, &out.Attr)
	t := d.start
	if c, ok := d.v.snaps.(SnapshotsChanged); ok {
		if ct := c.Changed(); ct.After(t) {
			t = ct
		}
	}
	out.SetTimes(&t, &t, &t)
	return 0
}

func (d *SnapshotsDir) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (d *SnapshotsDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ents, errno := d.entries(ctx)
	if errno != 0 {
		return nil, errno
	}
	return gofs.NewListDirStream(ents), 0
}

func (d *SnapshotsDir) entries(ctx context.Context) ([]fuse.DirEntry, syscall.Errno) {
	list, err := d.v.snaps.List(ctx)
	if err != nil {
		return nil, snapErrno(d.v.log, "list snapshots", err)
	}
	ents := make([]fuse.DirEntry, 2, len(list)+2) // "." and ".." first
	for _, s := range list {
		ents = append(ents, fuse.DirEntry{Name: s.Name, Mode: syscall.S_IFDIR, Ino: viewIno(s.ID, s.Root.Ino)})
	}
	copy(ents, withDots(d.EmbeddedInode(), nil))
	return ents, 0
}

// OpendirHandle lists the snapshots into a handle that declines the
// per-entry lookups of READDIRPLUS: a plain "ls .snapshots" of 10,000
// snapshots would otherwise make 10,000 nodes and kernel dentries
// (about 65 ms here, against the 50 ms target). A zero node id in a
// READDIRPLUS entry tells the kernel to take it as a plain dirent; "ls -l"
// then looks names up one by one as usual.
func (d *SnapshotsDir) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ents, errno := d.entries(ctx)
	if errno != 0 {
		return nil, 0, errno
	}
	return &plainListHandle{listDir: listDir{ents: ents}}, 0, 0
}

// plainListHandle is a directory handle over a fixed listing that
// READDIRPLUS sends as plain entries (.snapshots and .history).
type plainListHandle struct {
	listDir
}

var _ = (gofs.FileLookuper)((*plainListHandle)(nil))

// Lookup declines, so that READDIRPLUS sends a plain entry.
func (h *plainListHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.ENOENT
}

func (d *SnapshotsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer uncachedMiss(out, &errno) // the CLI and automatic snapshots add names
	s, err := d.v.snaps.Get(ctx, name)
	if err != nil {
		return nil, snapErrno(d.v.log, "lookup snapshot", err)
	}
	return d.rootNode(ctx, s, out), 0
}

// rootNode makes the node of snapshot s's root directory.
func (d *SnapshotsDir) rootNode(ctx context.Context, s index.Snapshot, out *fuse.EntryOut) *gofs.Inode {
	e := s.Root
	e.Name = s.Name
	fillAttr(s.ID, &e, &out.Attr)
	// A snapshot's attributes never change; its name may (rmdir, mv, or
	// the CLI behind the kernel's back), so the entry keeps the mount's
	// timeout.
	out.SetAttrTimeout(viewTimeout)
	return d.v.newNode(ctx, d.EmbeddedInode(), s.ID, e)
}

// Mkdir takes a snapshot called name.
func (d *SnapshotsDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if errno := checkSnapName(name); errno != 0 {
		return nil, errno
	}
	s, err := d.v.snaps.Create(ctx, name)
	if err != nil {
		return nil, snapErrno(d.v.log, "create snapshot", err)
	}
	return d.rootNode(ctx, s, out), 0
}

// Rmdir deletes the snapshot called name.
func (d *SnapshotsDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	return snapErrno(d.v.log, "delete snapshot", d.v.snaps.Delete(ctx, name))
}

// Rename renames a snapshot; it cannot leave .snapshots, and cannot
// replace another snapshot. A new name refused (a control character, an
// automatic snapshot's name) is EPERM, not mkdir's EINVAL: rename(2)'s
// EINVAL means "new is a subdirectory of old", and mv says so.
func (d *SnapshotsDir) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if newParent.EmbeddedInode() != d.EmbeddedInode() {
		return syscall.EXDEV
	}
	if flags&unixRenameExchange != 0 {
		return syscall.EINVAL
	}
	errno := checkSnapName(newName)
	if errno == 0 {
		errno = snapErrno(d.v.log, "rename snapshot", d.v.snaps.Rename(ctx, name, newName))
	}
	if errno == syscall.EINVAL {
		return syscall.EPERM
	}
	return errno
}

// unixRenameExchange is RENAME_EXCHANGE.
const unixRenameExchange = 2

func (d *SnapshotsDir) Unlink(ctx context.Context, name string) syscall.Errno {
	return syscall.EISDIR
}

// checkSnapName validates a snapshot name: ENAMETOOLONG past 255 bytes
// (FUSE leaves NAME_MAX to the filesystem), EINVAL for the rest of what
// index.CheckSnapshotName refuses.
func checkSnapName(name string) syscall.Errno {
	if len(name) > 255 {
		return syscall.ENAMETOOLONG
	}
	if index.CheckSnapshotName(name) != nil {
		return syscall.EINVAL
	}
	return 0
}
