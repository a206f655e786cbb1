package fs

import (
	"context"
	"path"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// childRel returns the live-tree relative path of name in directory n.
func (n *Node) childRel(name string) string {
	return path.Join(n.Path(nil), name)
}

func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n.fsys.hold()
	defer n.fsys.unhold()
	if n.reserved(name) {
		return nil, syscall.EEXIST
	}
	ch, errno := n.mkdirLive(ctx, name, mode, out)
	if errno == 0 {
		n.keepCallerMode(name, mode, out)
		n.inheritGroup(name, out)
		liveEntry(ch, out)
		n.touchNewDir(ch.StableAttr().Ino)
	}
	return ch, errno
}

func (n *Node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n.fsys.hold()
	defer n.fsys.unhold()
	if n.reserved(name) {
		return nil, syscall.EEXIST
	}
	ch, errno := n.mknodLive(ctx, name, mode, rdev, out)
	if errno == 0 {
		n.keepCallerMode(name, mode, out)
		n.inheritGroup(name, out)
	}
	if errno == 0 && mode&syscall.S_IFMT == syscall.S_IFREG {
		n.giveIDBeforeReply(name, out)
	}
	if errno == 0 {
		liveEntry(ch, out)
		n.touchChild(ch.StableAttr().Ino)
	}
	return ch, errno
}

// keepCallerMode gives child name, just made with the attributes out,
// the permission bits of mode the server's umask took (see umask.go).
func (n *Node) keepCallerMode(name string, mode uint32, out *fuse.EntryOut) {
	lost := n.umaskLost(mode, out.Mode, out.Gid)
	if lost == 0 || n.fsys.restoreMode(n.childRel(name), -1, out.Mode|lost, out.Mode) != nil {
		return
	}
	var st syscall.Stat_t
	if n.childStat(name, &st) == nil {
		out.Attr.FromStat(&st) // the chmod moved the ctime
	} else {
		out.Mode |= lost
	}
}

// inheritGroup gives child name, just made by go-fuse's loopback (which
// chowns it to its caller, uid and gid), the group of n when n is a
// setgid directory, as the kernel does for the caller.
func (n *Node) inheritGroup(name string, out *fuse.EntryOut) {
	if serverUID != 0 {
		return
	}
	dfd, err := n.openDir() // no symlink on the way (safe_ops.go)
	if err != nil {
		return
	}
	defer syscall.Close(dfd)
	var dir syscall.Stat_t
	if syscall.Fstat(dfd, &dir) != nil || dir.Mode&syscall.S_ISGID == 0 || out.Gid == dir.Gid {
		return
	}
	if chownNew(dfd, name, -1, int(dir.Gid)) != nil {
		return
	}
	var st syscall.Stat_t
	if lstatAt(dfd, name, &st) == nil {
		out.FromStat(&st)
	}
}

// giveIDBeforeReply gives the regular file Mknod just made, name in n, its
// FileID, as Create does, and takes its attributes again for the reply:
// the xattr moved its ctime, and a snapshot would otherwise give the ID
// behind the kernel's back.
func (n *Node) giveIDBeforeReply(name string, out *fuse.EntryOut) {
	dfd, err := n.openDir() // no symlink on the way (safe_ops.go)
	if err != nil {
		return
	}
	defer syscall.Close(dfd)
	id := NewFileID()
	setID := func(fd int) error { return unix.Setxattr(procFd(fd), XattrID, id[:], unix.XATTR_CREATE) }
	if withNew(dfd, name, setID) != nil {
		return // no user xattrs here, or it has one, or it is no longer the file made
	}
	var st syscall.Stat_t
	if lstatAt(dfd, name, &st) == nil {
		out.FromStat(&st)
	}
}

func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	n.fsys.hold()
	defer n.fsys.unhold()
	if n.reserved(name) {
		return nil, syscall.EEXIST
	}
	ch, errno := n.symlinkLive(ctx, target, name, out)
	if errno == 0 {
		n.inheritGroup(name, out)
		liveEntry(ch, out)
		n.touchChild(ch.StableAttr().Ino)
	}
	return ch, errno
}

func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.fsys.hold()
	defer n.fsys.unhold()
	if n.reserved(name) {
		return syscall.EPERM
	}
	if errno := n.unlinkLive(name, unix.AT_REMOVEDIR); errno != 0 {
		return errno
	}
	n.touchChild(0)
	if !n.fsys.quiet {
		n.fsys.rec.Removed(Remove{Path: n.childRel(name), Dir: true})
	}
	return 0
}

func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.reserved(name) {
		return syscall.EPERM
	}
	n.waitChildReleases(ctx, name)
	if n.fsys.quiet {
		return n.unlinkQuietly(ctx, name)
	}
	p := n.childPath(name)
	var st syscall.Stat_t
	var ino uint64
	var nlink uint32
	var id FileID
	reg := false
	if cid, err := n.childStatID(name, &st); err == nil { // one stat for the inode, the type and the links
		ino, nlink = st.Ino, uint32(st.Nlink)
		if reg = st.Mode&syscall.S_IFMT == syscall.S_IFREG; reg {
			id = cid
		}
	}
	if reg && nlink <= 1 {
		if errno := n.fsys.keepRemoved(ctx, p, ino, id); errno != 0 {
			return errno
		}
		if errno := n.fsys.waitRedo(ctx, id); errno != 0 {
			return errno
		}
	}
	n.fsys.hold() // after the waits (freeze.go)
	defer n.fsys.unhold()
	if errno := n.unlinkLive(name, 0); errno != 0 {
		return errno
	}
	n.touchChild(ino)
	if reg {
		nlink--
		n.noteUnlinked(name, nlink)
	}
	n.fsys.rec.Removed(Remove{Path: n.childRel(name), ID: id, Nlink: nlink, Uid: st.Uid})
	return 0
}

// noteUnlinked gives child name, a regular file just unlinked with nlink
// links left, the path it had: a change still open on it is reported
// under that path (see Node.unlinkedAs).
func (n *Node) noteUnlinked(name string, nlink uint32) {
	ch := n.GetChild(name)
	if nlink != 0 || ch == nil {
		return
	}
	if c, ok := ch.Operations().(*Node); ok {
		p := n.childRel(name)
		c.unlinkedAs.Store(&p)
	}
}

// unlinkQuietly is Unlink for a Recorder that takes no Removed events:
// the snapshot builder needs the inode number alone, which the node the
// kernel looked up (to unlink it) already has, and a regular file is
// looked at only if pending changes reach it by reference (keepRemoved;
// it keeps the file whatever its link count, which it does not know).
// An UnlinkListener hears a regular file's unlink with its ID, its owner
// and the links it has left (from the stat it needs for the owner).
func (n *Node) unlinkQuietly(ctx context.Context, name string) syscall.Errno {
	ino, reg := uint64(0), true
	var id FileID
	if ch := n.GetChild(name); ch != nil {
		ino, reg = ch.StableAttr().Ino, ch.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG
		if c, ok := ch.Operations().(*Node); ok && reg {
			c.mu.Lock()
			id = c.reported
			c.mu.Unlock()
		}
	} else {
		ino = n.childIno(name)
	}
	redo := reg && n.fsys.redoing()
	var uid, nlink uint32
	if pend := reg && ino != 0 && n.fsys.refs.pending(ino); pend || reg && n.fsys.unlinks || redo {
		p := n.childPath(name)
		var st syscall.Stat_t
		cid, serr := n.childStatID(name, &st) // one descriptor for both (safe_ops.go)
		if id.IsZero() {
			id = cid
		}
		if n.fsys.unlinks && !id.IsZero() && serr == nil && cid == id {
			uid = st.Uid // whose file leaves the path (vacated paths)
			nlink = uint32(st.Nlink) - 1
		}
		if pend {
			if errno := n.fsys.keepRemoved(ctx, p, ino, id); errno != 0 {
				return errno
			}
		}
		if errno := n.fsys.waitRedo(ctx, id); errno != 0 {
			return errno
		}
	}
	n.fsys.hold() // after the waits (freeze.go)
	defer n.fsys.unhold()
	if errno := n.unlinkLive(name, 0); errno != 0 {
		return errno
	}
	n.touchChild(ino)
	if reg && n.fsys.unlinks && nlink == 0 {
		n.noteUnlinked(name, 0)
	}
	if reg && n.fsys.unlinks && !id.IsZero() {
		n.fsys.rec.Removed(Remove{Path: n.childRel(name), ID: id, Uid: uid, Nlink: nlink})
	}
	return 0
}

func (n *Node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if n.reserved(name) {
		return nil, syscall.EEXIST
	}
	t, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	n.fsys.hold()
	defer n.fsys.unhold()
	ch, errno := n.linkLive(ctx, t, name, out)
	if errno != 0 {
		return nil, errno
	}
	liveEntry(t.EmbeddedInode(), out) // the reply is t's: go-fuse keeps t for ch
	n.touchChild(t.liveIno())
	t.touchSelf() // its link count shows in the directory holding it too
	if !n.fsys.quiet {
		n.fsys.rec.Linked(Link{Path: n.childRel(name), Target: t.relPath(), ID: t.readIDSafe()})
	}
	return ch, 0
}

// Rename renames in the live tree and reports it. RENAME_NOREPLACE and
// RENAME_EXCHANGE pass through to renameat2(2). A move into .snapshots
// is EPERM: on EXDEV mv copies instead, and its mkdir there would take
// a snapshot named after what it moves.
func (n *Node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*Node)
	if _, snaps := newParent.(*SnapshotsDir); snaps {
		return syscall.EPERM
	}
	if !ok {
		return syscall.EXDEV
	}
	if n.reserved(name) || np.reserved(newName) {
		return syscall.EPERM
	}
	n.waitChildReleases(ctx, name)
	np.waitChildReleases(ctx, newName)
	ev := n.renameEvent(name, np, newName, flags)
	fromIno, toIno := n.childIno(name), np.childIno(newName)
	if !ev.Exchange && toIno != 0 && toIno != fromIno {
		if errno := n.fsys.keepRemoved(ctx, np.childPath(newName), toIno, ev.Replaced); errno != 0 {
			return errno
		}
		if errno := n.fsys.waitRedo(ctx, ev.Replaced); errno != 0 {
			return errno
		}
	}
	n.fsys.hold() // after the waits (freeze.go)
	defer n.fsys.unhold()
	if errno := n.renameLive(name, np, newName, flags); errno != 0 {
		return errno
	}
	n.touchChild(fromIno)
	np.touchChild(toIno)
	n.fsys.rec.Renamed(ev)
	return 0
}

// renameEvent describes a rename about to happen.
func (n *Node) renameEvent(name string, np *Node, newName string, flags uint32) Rename {
	ev := Rename{From: n.childRel(name), To: np.childRel(newName), Exchange: flags&renameExchange != 0}
	var st syscall.Stat_t
	if id, err := n.childStatID(name, &st); err == nil {
		ev.Dir = st.Mode&syscall.S_IFMT == syscall.S_IFDIR
		if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			ev.ID, ev.Uid = id, st.Uid
		}
	}
	if id, err := np.childStatID(newName, &st); err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		ev.Replaced, ev.ReplacedUid = id, st.Uid
		if st.Nlink > 1 && !ev.Exchange && !ev.Replaced.IsZero() {
			ev.ReplacedLivesAt = np.otherLink(newName, n, st.Ino)
			ev.ReplacedElsewhere = ev.ReplacedLivesAt == ""
		}
	}
	return ev
}

// otherLink returns the path, below the root, of a name other than
// child name of n that inode ino (n's child name) has in n or in dir,
// found by inode number in their directory listings; "" if none.
func (n *Node) otherLink(name string, dir *Node, ino uint64) string {
	dirs := []*Node{n}
	if dir != n {
		dirs = append(dirs, dir)
	}
	for _, d := range dirs {
		if other := d.nameOfInoIn(ino, name); other != "" {
			return d.childRel(other)
		}
	}
	return ""
}

// renameExchange is RENAME_EXCHANGE of renameat2(2).
const renameExchange = 1 << 1
