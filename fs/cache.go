package fs

import (
	"context"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// liveTimeout is how long the kernel may keep the live tree's entries,
// negative entries (Options.NegativeTimeout) and attributes. The views
// keep other timeouts: inside a snapshot nothing changes (viewTimeout,
// an hour); the names of .snapshots and of .history change behind the
// kernel's back (a snapshot taken by the CLI or on a timer, a renamed
// one, a file's first revision), so their entries keep the mount-wide
// cacheTimeout (one second) and a miss there is not cached at all
// (uncachedMiss).
//
// The live directory is this server's alone while it is mounted (see
// package mount), and nearly every change to it arrives as a request
// through the kernel, which updates or invalidates its own cache for
// it: a create, mknod, link, unlink or rename replies with or drops the
// entry (a negative one included) and invalidates the directory's
// attributes; an unlink or a rename over a file invalidates the
// victim's attributes; a write(2) (cached or passthrough), a
// truncation, a copy or an xattr change invalidates the file's size,
// times or ctime; a setattr replies with the new attributes.
//
// What reaches the live file without such a request, this server
// reports with an attribute invalidation (Inode.NotifyContent(-1, 0),
// one message to the kernel, no round trip):
//   - the FileID xattr moves the ctime: Create and Mknod set it before
//     their reply is taken; a writable open or a truncate(2) that gives
//     an old file its FileID invalidates (newSession) or re-stats;
//     a snapshot that gives one to a file still without (a store's
//     older files) invalidates its node (FS.idGiven);
//   - a write through a shared mapping moves the live file's mtime and
//     ctime, which the kernel's copy of the attributes does not follow
//     (a passthrough writer's mapping is the live file's own; seen with
//     cached writers too): when a writer's session reports (last
//     release, fsync) and the live file's size, mtime or ctime differ
//     from the last attributes sent to the kernel (attrsSent), the node
//     invalidates. After a plain write+close the kernel had invalidated
//     already, and the message is redundant but cheap (git's objects);
//     a file whose last reply was taken after its last change (tar's
//     utimens) gets none, and keeps its cache;
//   - dropped setuid bits at a write (killpriv.go).
//
// Not covered: a mapping kept after close(2) of a passthrough writer
// (the kernel gives the mapping the live file itself: no RELEASE
// follows its later writes), and atime, which reads by passthrough and
// by the recorder move behind the kernel's cache.
//
// A longer cache saves the LOOKUP and GETATTR of every revalidation,
// and a negative entry the LOOKUP of every miss: with go-fuse's one
// second, find, du, git's index refresh and rm -rf after an untar
// looked every name up again, and a search path (a compiler's include
// directories, PATH) every missing name. An hour, not forever: a
// process that writes into the live directory behind the mount (which
// it must not) is seen within that time.
const liveTimeout = time.Hour

// liveEntry sets the timeouts of a reply naming the live node ch, and
// notes the attributes the kernel is sent (attrsSent).
func liveEntry(ch *gofs.Inode, out *fuse.EntryOut) {
	out.SetEntryTimeout(liveTimeout)
	out.SetAttrTimeout(liveTimeout)
	if n, ok := ch.Operations().(*Node); ok {
		n.sent.note(&out.Attr)
	}
}

// uncachedMiss makes a lookup's ENOENT (*errno) a plain error, which the
// kernel does not cache, in a view whose names appear behind its back.
// go-fuse's bridge turns ENOENT into a negative entry, kept for
// Options.NegativeTimeout (liveTimeout), only when the reply's entry
// timeout is zero, and sends the error itself otherwise: per node,
// go-fuse offers no other negative timeout than these two. (An hour with
// an entry invalidation, Inode.NotifyEntry, wherever a name appears,
// would need every snapshot path and every live create to know the
// views' nodes; a miss in a view is rare.)
func uncachedMiss(out *fuse.EntryOut, errno *syscall.Errno) {
	if *errno == syscall.ENOENT {
		out.SetEntryTimeout(cacheTimeout)
	}
}

// attrStamp is what a change of content moves in a file's attributes.
type attrStamp struct {
	size         uint64
	mtime, ctime int64 // ns
}

// attrsSent holds the stamp of the last attributes of a live node sent
// to the kernel (a lookup, getattr, setattr or creation reply).
// A reply noted on a node that go-fuse then discards for the one it
// knows (a file looked up by another of its names) leaves the known
// node an older stamp: an invalidation too many, never one too few, as
// a change moves the ctime.
type attrsSent struct {
	mu sync.Mutex
	s  attrStamp
}

func (a *attrsSent) note(attr *fuse.Attr) {
	s := attrStamp{attr.Size, int64(attr.Mtime)*1e9 + int64(attr.Mtimensec), int64(attr.Ctime)*1e9 + int64(attr.Ctimensec)}
	a.mu.Lock()
	a.s = s
	a.mu.Unlock()
}

func (a *attrsSent) matches(st *syscall.Stat_t) bool {
	s := attrStamp{uint64(st.Size), st.Mtim.Nano(), st.Ctim.Nano()}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.s == s
}

// invalidateIfMoved drops the kernel's attributes of n if the live file,
// whose stat is st, moved since the kernel was last sent them.
func (n *Node) invalidateIfMoved(st *syscall.Stat_t) {
	if st != nil && !n.sent.matches(st) {
		_ = n.NotifyContent(-1, 0) // attributes only
	}
}

// Getattr stats the live file (through the open handle f if any) and
// lets the kernel keep the result for liveTimeout.
func (n *Node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fsys.getattrs.Add(1)
	errno := n.getattrLive(ctx, f, out)
	if errno == 0 {
		out.SetTimeout(liveTimeout)
		n.sent.note(&out.Attr)
	}
	return errno
}

// dirStream is what go-fuse's loopback directory handle serves.
type dirStream interface {
	gofs.FileReaddirenter
	gofs.FileSeekdirer
	gofs.FileReleasedirer
	gofs.FileFsyncdirer
}

// liveDir is the handle of a live directory other than the root: the
// loopback's stream, whose READDIRPLUS sends a plain entry (no lookup,
// no lstat) for a child the kernel knows already. go-fuse holds a node
// for a name exactly as long as the kernel holds its inode, and the
// kernel keeps the entry and attributes for liveTimeout since it last
// heard of them: find, du and rm -rf after an untar, or git's walk of
// a tree it just checked out, would otherwise have every name looked up
// again. A child whose entry or attributes the kernel let go is looked
// up or stat'ed by itself, one request each, as in a plain READDIR.
type liveDir struct {
	dirStream
	n *Node
}

var _ = (gofs.FileLookuper)((*liveDir)(nil))

// Lookup declines (a plain entry) for a known child, else looks name up.
func (d *liveDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if d.n.GetChild(name) != nil {
		return nil, syscall.ENOENT
	}
	return d.n.Lookup(ctx, name, out)
}
