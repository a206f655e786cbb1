package fs

import (
	"context"
	"golang.org/x/sys/unix"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// handle is an open live file in the kernel's cached I/O mode: every
// write reaches us, so the node's session learns the written ranges.
// Writable opens get one (unless the inode is in passthrough mode, see
// Node.ioMode); so do read-only opens while a writer is open.
//
// handle forwards to a go-fuse LoopbackFile by name, not by embedding:
// embedding would give it PassthroughFd, and go-fuse would then open it
// in passthrough mode, where writes bypass us.
type handle struct {
	n        *Node
	lf       *gofs.LoopbackFile
	fd       int
	writable bool
	mark     closeMark
}

// passthroughHandle is an open live file in passthrough mode: the kernel
// reads (and, for a writer, writes) the live file itself. A writer of
// this kind marks its session Whole (ranges unknown).
type passthroughHandle struct {
	*gofs.LoopbackFile
	n        *Node
	fd       int
	writable bool
	mark     closeMark
	flushed  bool // closed (FLUSH) and not yet released; under n.mu
}

// fdHolder is implemented by both handle kinds.
type fdHolder interface{ liveFd() int }

func (h *handle) liveFd() int            { return h.fd }
func (h *passthroughHandle) liveFd() int { return h.fd }

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return h.lf.Read(ctx, dest, off)
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return h.n.write(ctx, h.fd, &h.mark, data, off)
}

// write is a WRITE through a handle of n on the live file fd: the
// session is dirtied (which may wait for the recorder) before the write
// holds the freeze (freeze.go) for the change itself.
func (n *Node) write(ctx context.Context, fd int, mark *closeMark, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := n.dirtying(ctx); errno != 0 {
		return 0, errno
	}
	n.fsys.hold()
	defer n.fsys.unhold()
	if errno := n.killPrivsBeforeWrite(ctx, fd); errno != 0 {
		return 0, errno
	}
	w, err := syscall.Pwrite(fd, data, off)
	if w > 0 {
		n.wrote(off, int64(w))
	}
	n.closeUndone(mark)
	return uint32(max(w, 0)), n.fsys.errno("write", err)
}

// Flush is close(2) of a descriptor of h (see history_wait.go).
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if h.writable {
		h.n.closeSeen(&h.mark)
	}
	return h.lf.Flush(ctx)
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.n.fsync(ctx, h.fd)
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.n.released(h.fd, false, h.writable)
	h.n.closeUndone(&h.mark)
	return h.lf.Release(ctx)
}

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

func (h *handle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return h.n.setattrOpen(ctx, h.fd, in, out, h.lf.Setattr)
}

// setattrOpen is a SETATTR through an open handle on fd: a size change
// dirties the file first and then counts as a truncation of the open
// file; the privilege bits go as killPrivsFlagged says; set applies it
// to the live file.
//
// A truncation to the size the file has changes no byte (`truncate -s`
// of a file to its own size comes this way) and is no change: only its
// times move. A write racing it that had extended the file is cut back,
// and that write's own note, clipped to the size at the report, covers
// it.
func (n *Node) setattrOpen(ctx context.Context, fd int, in *fuse.SetAttrIn, out *fuse.AttrOut,
	set func(context.Context, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno) syscall.Errno {
	sz, resize := in.GetSize()
	if resize {
		if st := fstat(fd); st != nil && st.Size == int64(sz) {
			resize = false
		}
	}
	if resize {
		// Node.Setattr dirtied the session and waited before it took
		// the freeze; this dirties a session an fsync started since.
		n.mu.Lock()
		n.dirtyingLocked()
		n.mu.Unlock()
	}
	if errno := n.killPrivsFlagged(in, fd); errno != 0 {
		return errno
	}
	if !resize { // no byte changes: see sessionSetattr
		return n.sessionSetattr(out, func() syscall.Errno { return set(ctx, in, out) })
	}
	if errno := set(ctx, in, out); errno != 0 {
		return errno
	}
	n.truncatedOpen(int64(sz))
	return 0
}

func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return h.n.allocate(ctx, h.fd, off, size, mode, h.lf.Allocate)
}

// allocate is a FALLOCATE through a handle of n on fd; alloc applies it
// to the live file.
func (n *Node) allocate(ctx context.Context, fd int, off, size uint64, mode uint32,
	alloc func(context.Context, uint64, uint64, uint32) syscall.Errno) syscall.Errno {
	if mode&unix.FALLOC_FL_KEEP_SIZE != 0 {
		// Past the end with the size kept, no byte changes (blocks
		// reserved, or a hole punched where the file has none): no
		// change to record (a review found a revision the same as the
		// one before).
		if st := fstat(fd); st != nil && int64(off) >= st.Size {
			return alloc(ctx, off, size, mode)
		}
	}
	if errno := n.dirtying(ctx); errno != 0 {
		return errno
	}
	n.fsys.hold()
	defer n.fsys.unhold()
	if errno := alloc(ctx, off, size, mode); errno != 0 {
		return errno
	}
	// Punching or zeroing changes bytes in place; plain allocation past
	// the end changes the size. Counting the range as written covers all.
	n.wrote(int64(off), int64(size))
	return 0
}

// Read is reached only when the kernel did not take the passthrough
// (no CAP_PASSTHROUGH, or not root).
func (h *passthroughHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.n.fsys.serverReads.Add(1)
	return h.LoopbackFile.Read(ctx, dest, off)
}

func (h *passthroughHandle) Release(ctx context.Context) syscall.Errno {
	h.n.ptReleasing(h)
	h.n.released(h.fd, true, h.writable)
	h.n.closeUndone(&h.mark)
	return h.LoopbackFile.Release(ctx)
}

// Flush is close(2) of a descriptor of h (see history_wait.go).
func (h *passthroughHandle) Flush(ctx context.Context) syscall.Errno {
	if h.writable {
		h.n.closeSeen(&h.mark)
	}
	h.n.ptFlushed(h)
	return h.LoopbackFile.Flush(ctx)
}

func (h *passthroughHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if !h.writable {
		return h.n.fsys.errno("fsync", syscall.Fsync(h.fd))
	}
	return h.n.fsync(ctx, h.fd)
}

// Write is reached only when the kernel did not take the passthrough.
func (h *passthroughHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return h.n.write(ctx, h.fd, &h.mark, data, off)
}

func (h *passthroughHandle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return h.n.setattrOpen(ctx, h.fd, in, out, h.LoopbackFile.Setattr)
}

func (h *passthroughHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return h.n.allocate(ctx, h.fd, off, size, mode, h.LoopbackFile.Allocate)
}
