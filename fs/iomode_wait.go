package fs

import (
	"context"
	"syscall"
	"time"
)

// A writer that opens a file just after a reader closed it would find
// the inode still in passthrough mode: the reader's RELEASE reaches us
// after its close(2) returned (the kernel sends it in the background),
// and ioMode keeps the mode for ioModeGrace after it. Such a writer was
// forced into passthrough and its whole session Whole: every recorded
// fsync of a database opened right after a read of it diffed the whole
// file (M2's random writes, opened right after its random reads, read
// and diffed the 256 MiB file at its fsync in most runs: 6-8 s of the
// mount's CPU against ~0.8 s from the ranges). So a writable in-place
// open of a big file waits, up to ptCloseWait, while every passthrough
// handle of the inode is closed (FLUSH seen) but not yet released, and
// then out the grace. A reader still open (no FLUSH) is not waited for:
// the writer joins it in passthrough, as before. Small files do not wait:
// diffing them costs less than the wait.

// ptCloseWait bounds the wait for closing passthrough handles.
const ptCloseWait = 100 * time.Millisecond

// wholeWaitMin is the size from which a writer waits rather than be Whole.
const wholeWaitMin = 8 << 20

// awaitCachedMode waits, for a writable in-place open of the live file fd,
// until the inode can leave passthrough mode (see above).
func (n *Node) awaitCachedMode(ctx context.Context, fd int) {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Size < wholeWaitMin {
		return
	}
	deadline := time.Now().Add(ptCloseWait)
	for n.passthroughClosing() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
}

// passthroughClosing reports whether every passthrough handle of n is
// closed but not released, or the last one was released within the grace.
func (n *Node) passthroughClosing() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.passed > 0 {
		return n.passed == n.ptClosing
	}
	return time.Since(n.passedReleased) < ioModeGrace
}

// ptFlushed notes a FLUSH (close(2)) of passthrough handle h.
func (n *Node) ptFlushed(h *passthroughHandle) {
	n.mu.Lock()
	if !h.flushed {
		h.flushed = true
		n.ptClosing++
	}
	n.mu.Unlock()
}

// ptReleasing forgets h's FLUSH before its release.
func (n *Node) ptReleasing(h *passthroughHandle) {
	n.mu.Lock()
	if h.flushed {
		h.flushed = false
		n.ptClosing--
	}
	n.mu.Unlock()
}
