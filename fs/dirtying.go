package fs

import (
	"context"
	"syscall"
)

// Journal hook. A recorder records a change after it happened, in the
// background; a mount killed in between leaves a live file newer than
// its history. So before a session's first change reaches the live file,
// the Recorder hears Dirtied (it journals the file durably enough to
// outlive the process), and a later mount redoes the recordings the
// journal names. The order matters: the kernel may keep the write and
// lose us, so the journal entry must exist before the write does.
//
// The cost is one atomic load per write: Dirtied is called once per
// session (n.dirtied), and again only after a report starts a new one.

// dirtying tells the Recorder, once per session, that n's content is
// about to change. Call it before the change reaches the live file.
//
// At a session's first change it then waits until the recorder has read
// the changes of n reported before (waitRecorded), as a writable open
// does: a writer that kept its handle through an fsync would otherwise
// change the file under the read of that fsync's change, if the change
// was queued (an fsync interval's hold that ended) just before this
// write. A change still held is kept held by Dirtied instead (see the
// Recorder's docs in package mount), so the order matters: Dirtied first,
// then the wait.
func (n *Node) dirtying(ctx context.Context) syscall.Errno {
	if n.dirtied.Load() {
		return 0
	}
	n.mu.Lock()
	first := n.dirtyingLocked()
	n.mu.Unlock()
	if !first {
		return 0
	}
	errno := n.waitRecorded(ctx)
	if errno != 0 {
		// Interrupted (a signal): the write fails with EINTR and is
		// retried; the retry must wait again.
		n.dirtied.Store(false)
	}
	return errno
}

// dirtyingLocked is dirtying with n.mu held, without the wait; it
// reports whether it told the Recorder. The noting functions (wrote,
// truncatedOpen, copied) call it too, for a write that raced with an
// fsync starting the next session.
func (n *Node) dirtyingLocked() bool {
	if n.sess == nil || n.sess.id.IsZero() || n.dirtied.Load() {
		return false
	}
	p := n.relPath()
	if p == "" && n.sess.created {
		p = n.createdAt // not linked yet: called from Create
	}
	n.fsys.rec.Dirtied(n.sess.id, p)
	n.dirtied.Store(true)
	return true
}

// dirtyingPath is dirtying for changes made by path or by open
// (truncate(2), O_TRUNC): with no writer open there is no session, and
// the id is read from the live file. A file without one has no history
// to fall behind.
func (n *Node) dirtyingPath() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sess != nil {
		n.dirtyingLocked()
		return
	}
	if id := n.readIDSafe(); !id.IsZero() {
		n.fsys.rec.Dirtied(id, n.relPath())
	}
}

// sessionEnded forgets that the session was journaled, with n.mu held:
// its report carries the change on, and the next change starts again.
func (n *Node) sessionEnded() { n.dirtied.Store(false) }

// undirtied tells the Recorder, if it takes it back (Undirtier), that
// the session its last Dirtied of id announced ended with no change.
func (n *Node) undirtied(id FileID) {
	if u, ok := n.fsys.rec.(Undirtier); ok {
		u.Undirtied(id)
	}
}
