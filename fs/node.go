package fs

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// Node is a file, directory or symlink of the live tree. It embeds
// go-fuse's LoopbackNode for the operations that need nothing from us
// (lookup, getattr, readlink, statfs, mknod, ...) and overrides those
// that change content or names, to tell the Recorder, and those that
// touch the reserved names.
//
// One Node exists per live inode (go-fuse merges hard links by inode
// number), so the write session below is per file, not per name.
type Node struct {
	gofs.LoopbackNode
	fsys *FS

	mu sync.Mutex
	// cached and passed count the open handles of this inode in the
	// kernel's cached I/O mode and in passthrough mode. The kernel
	// refuses to mix the two on one inode (ETXTBSY or EINVAL), so at
	// most one of them is non-zero: see ioMode.
	cached, passed int
	// when the last handle of each mode was released (see ioMode)
	cachedReleased, passedReleased time.Time
	ptClosing                      int      // passthrough handles closed (FLUSH) but not released
	writers                        int      // open writable handles, of either mode
	sess                           *session // set while writers > 0 or a change is pending
	reported                       FileID   // id of the last Change reported, zero if none
	// unlinkedAs is the path a regular file had when its last name was
	// unlinked (its node then has no path): a change still open on it is
	// reported under it, so that its history, a new file's too, is listed
	// as a deleted file's where it was (a review found it under "").
	unlinkedAs atomic.Pointer[string] // set without n.mu: Unlink holds the freeze
	// wholeNext: the last session had an in-place passthrough writer
	// (see session.ptInPlace), so the next one reports the file whole.
	wholeNext bool
	// dirtied is set once the session's Recorder.Dirtied is called, so
	// that later writes skip n.mu (see dirtying.go).
	dirtied atomic.Bool
	// closing counts writable handles closed (FLUSH) but not yet
	// released, with no write since, and closedAt is the latest such
	// FLUSH in Unix nanoseconds (see history_wait.go)
	closing  atomic.Int32
	closedAt atomic.Int64
	// attrGen counts SETATTRs; noPrivsAt is attrGen+1 when the live
	// file was last seen with neither setuid nor setgid (killpriv.go).
	attrGen, noPrivsAt atomic.Uint64
	// sent is the last attributes sent to the kernel (cache.go)
	sent attrsSent
	// noCap: the live file is known to have no security.capability
	// (node_attr.go's Getxattr)
	noCap atomic.Bool
	// createdAt is the path Create made the file at: a passthrough
	// writer's Dirtied comes from within Create, before the kernel links
	// the inode (relPath is still ""), and the Recorder needs the path
	// (a save's new file continues the history of the file that left
	// it). Guarded by mu.
	createdAt string
}

// waitRecorded waits until the recorder has read (ReadWaiter) or else
// recorded the changes of n reported so far, so that a writer about to
// change the file again does not change it under a recording that reads
// the live file. Only this one file waits, and only while its previous
// change is in the queue. A file that reported nothing in this mount
// waits only while the Recorder has redos queued (RedoWaiter): then by
// its session's FileID, or the live file's.
func (n *Node) waitRecorded(ctx context.Context) syscall.Errno {
	n.mu.Lock()
	id := n.reported
	if id.IsZero() && n.sess != nil {
		id = n.sess.id
	}
	reported := !n.reported.IsZero()
	n.mu.Unlock()
	if !reported {
		if !n.fsys.redoing() {
			return 0
		}
		if id.IsZero() {
			id = n.readIDSafe()
		}
	}
	return n.fsys.waitRead(ctx, id)
}

// redoing reports whether the Recorder has redos queued (RedoWaiter).
func (f *FS) redoing() bool {
	rw, ok := f.rec.(RedoWaiter)
	return ok && rw.Redoing()
}

// waitRedo waits, while a redo of file id is queued, until the Recorder
// has read the changes of id queued so far: an unlink or a rename over
// is about to take the file out of the live tree, where its redo reads
// it. (Its other changes are kept for it by keepRemoved.)
func (f *FS) waitRedo(ctx context.Context, id FileID) syscall.Errno {
	if rw, ok := f.rec.(RedoWaiter); !ok || id.IsZero() || !rw.Redoing() || !rw.RedoPending(id) {
		return 0
	}
	return f.waitRead(ctx, id)
}

// waitRead waits until the Recorder has read (ReadWaiter) or else
// recorded the changes of file id queued so far.
func (f *FS) waitRead(ctx context.Context, id FileID) syscall.Errno {
	if id.IsZero() {
		return 0
	}
	if rw, ok := f.rec.(ReadWaiter); ok {
		return f.errno("wait for recording", rw.WaitRead(ctx, id))
	}
	return f.errno("wait for recording", f.rec.Wait(ctx, id))
}

// livePath returns the absolute path of n in the live directory. For a
// node that lost its name (unlinked or renamed over while the kernel
// still knows it) it returns a path under the reserved .snapshots name,
// which never exists in the live directory, so that path operations fail
// with ENOENT instead of acting on the root.
func (n *Node) livePath() string {
	rel := n.relPath()
	if rel == "" && !n.isRoot() {
		return filepath.Join(n.fsys.live, SnapshotsName, "unlinked")
	}
	return filepath.Join(n.fsys.live, rel)
}

// relPath returns n's live-tree relative path, or "" if n has no name
// any more (unlinked while open).
func (n *Node) relPath() string {
	if _, parent := n.Parent(); parent == nil && !n.IsRoot() {
		return ""
	}
	return n.Path(nil)
}

// isRoot reports whether n is the root of the mount.
func (n *Node) isRoot() bool { return n == n.fsys.root }

// childPath returns the live path of name in directory n.
func (n *Node) childPath(name string) string {
	return filepath.Join(n.livePath(), name)
}

// reserved reports whether name in directory n is a name users may not
// create or remove.
func (n *Node) reserved(name string) bool {
	return n.isRoot() && (name == SnapshotsName || name == HistoryName)
}

// readID returns the FileID stored on the live file at path, or the
// zero FileID.
func readID(path string) FileID {
	var id FileID
	if sz, err := unix.Lgetxattr(path, XattrID, id[:]); err != nil || sz != len(id) {
		return FileID{}
	}
	return id
}

// fdID returns the FileID of the open live file fd, assigning a fresh one
// if it has none (assigned is set then).
func fdID(fd int) (id FileID, assigned bool) {
	if sz, err := unix.Fgetxattr(fd, XattrID, id[:]); err == nil && sz == len(id) {
		return id, false
	}
	id = NewFileID()
	if err := unix.Fsetxattr(fd, XattrID, id[:], 0); err != nil {
		return FileID{}, false // the live filesystem keeps no user xattrs
	}
	return id, true
}

// newFdID gives the live file fd, which Create just opened with
// O_CREAT, a fresh FileID: one fsetxattr for a new file, where fdID
// spends an fgetxattr first. A file that existed already (O_CREAT
// without O_EXCL) keeps its own.
func newFdID(fd int) FileID {
	id := NewFileID()
	err := unix.Fsetxattr(fd, XattrID, id[:], unix.XATTR_CREATE)
	if err == nil {
		return id
	}
	if err == unix.EEXIST {
		id, _ = fdID(fd)
		return id
	}
	return FileID{} // the live filesystem keeps no user xattrs
}
