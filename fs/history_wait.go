package fs

import (
	"context"
	"strings"
	"sync/atomic"
	"time"
)

// A file's change is reported when its last writable handle is released,
// and the kernel sends RELEASE after close(2) has returned, without
// waiting for it. So that ".history/f" asked right after "echo x > f"
// still shows x, .history first waits, for a short while, for the
// releases of f's writable handles whose close it has seen (a FLUSH) and
// that have not written since. A handle left open through a dup of its
// descriptor looks the same until it writes again (a shell's "exec >log",
// "make >log": its writes may be passthrough, unseen), so the wait is
// bounded by closingWait after the wait's start and after the latest
// FLUSH: a close seen longer ago than that is taken for a dup's, and
// unlinks, renames and snapshots after it do not wait for it.
//
// A snapshot waits the same way, for every file at once (WaitReleases):
// otherwise a file closed just before "mkdir .snapshots/x" is recorded by
// the snapshot build itself, and its late release records it once more.

// closingWait bounds the wait for releases in flight: a RELEASE normally
// follows its FLUSH within a millisecond.
const closingWait = 100 * time.Millisecond

// openClosingWait is closingWait for a writable open (see Open): shorter,
// since a file whose writer is kept by a dup (`make >build.log`, whose
// children each close their copy) would make every other writable open
// of it (`cmd >>build.log`) wait this long after a child's close.
const openClosingWait = 20 * time.Millisecond

// closeMark is a writable handle's part: whether its close was seen
// with no write since.
type closeMark struct {
	on atomic.Bool
}

// closeSeen notes a FLUSH of a writable handle.
func (n *Node) closeSeen(m *closeMark) {
	now := time.Now().UnixNano()
	n.closedAt.Store(now)
	n.fsys.closedAt.Store(now)
	if !m.on.Swap(true) {
		n.closing.Add(1)
		n.fsys.closing.Add(1)
	}
}

// closeUndone notes a write after a FLUSH (the descriptor was a dup) or
// the handle's release; call it after the release's report.
func (n *Node) closeUndone(m *closeMark) {
	if m.on.Load() && m.on.Swap(false) {
		n.closing.Add(-1)
		n.fsys.closing.Add(-1)
	}
}

// waitReleases waits up to closingWait until no writable handle of the
// live file at rel (below the root) is closed but not released.
func (f *FS) waitReleases(ctx context.Context, rel string) {
	n := f.liveNode(rel)
	if n == nil {
		return
	}
	waitZero(ctx, &n.closing, &n.closedAt, closingWait)
}

// waitChildReleases waits up to closingWait until no writable handle of
// child name of n is closed but not released. An unlink or rename calls
// it first: "echo v2 > f; mv t f" must report f's change (at its
// RELEASE, which the kernel may send after the RENAME) before f's name
// goes, or the change would be recorded after the rename, as f's newest
// revision, or lost with the file's last name (keepRemoved).
func (n *Node) waitChildReleases(ctx context.Context, name string) {
	if n.fsys.closing.Load() <= 0 {
		return
	}
	if ch := n.GetChild(name); ch != nil {
		if c, ok := ch.Operations().(*Node); ok {
			waitZero(ctx, &c.closing, &c.closedAt, closingWait)
		}
	}
}

// WaitFileReleases is waitReleases for the mount's history commands
// (deltafs log, cat, restore): rel is slash-separated, below the root.
func (f *FS) WaitFileReleases(ctx context.Context, rel string) {
	f.waitReleases(ctx, rel)
}

// WaitReleases waits up to closingWait until no writable handle of any
// live file is closed but not released: a snapshot calls it first, so
// that the changes of every close that returned before it are reported.
func (f *FS) WaitReleases(ctx context.Context) {
	waitZero(ctx, &f.closing, &f.closedAt, closingWait)
}

// waitZero polls c until it is zero, for at most bound, and not past
// bound after the latest FLUSH counted in c (closedAt, in Unix
// nanoseconds): a handle closed longer ago than that is taken for one a
// dup keeps. It reports whether it had to wait. (Bounding it by the
// latest FLUSH alone would let a writer whose children keep closing their
// copies of its descriptor, a shell loop running under "exec >log", hold
// every wait for as long as it runs.)
func waitZero(ctx context.Context, c *atomic.Int32, closedAt *atomic.Int64, bound time.Duration) (waited bool) {
	if c.Load() <= 0 { // the common case, on every writable open: no clock read
		return false
	}
	deadline := time.Now().Add(bound)
	for c.Load() > 0 && ctx.Err() == nil && time.Now().Before(deadline) {
		if time.Since(time.Unix(0, closedAt.Load())) >= bound {
			return waited
		}
		time.Sleep(time.Millisecond)
		waited = true
	}
	return waited
}

// liveNode returns the node of the live tree at rel, if the kernel knows
// it (a file with an open handle always is).
func (f *FS) liveNode(rel string) *Node {
	in := f.root.EmbeddedInode()
	for _, name := range strings.Split(rel, "/") {
		if in = in.GetChild(name); in == nil {
			return nil
		}
	}
	n, _ := in.Operations().(*Node)
	return n
}
