package fs

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/deltafs/deltafs/internal/spill"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A read-only text of spillMin bytes or more (a big file's revision in
// .snapshots or .history) is rebuilt at its open and written to an
// unlinked file (O_TMPFILE) of the live directory's file system, which
// the opens of the file share until the last is released. Held in
// memory instead, it stayed in the mount's RSS for as long as any reader
// kept it open (a 1 GiB file read from a snapshot: +1 GB); in a file it
// is the page cache's, which the kernel reclaims, and the opens read it
// through FUSE passthrough where the mount has it, at the speed of a
// local file. Where the store can (TextWriter: a chunked fulltext, and
// a delta on one whose copies never read behind where they write: the
// mount's in-place writes, appends and truncations of a big file), the
// text is written into the file a few MiB at a time; otherwise it is
// rebuilt whole in memory first (objstore.Store.Get). Where the file system lacks room
// (spill.Slack beyond the text) or O_TMPFILE, the text stays in memory.
const spillMin = freeBigText

// spill returns the text in an unlinked file of dir, read with read and
// written at the first open of the current opens (the caller counted
// it: t.open); the later opens share that file, or, if the first open's
// spill failed, are served from memory as it is. err is read's error;
// spillErr says why the text could not be written to a file, in which
// case it is kept in memory for get.
func (t *sharedText) spill(ctx context.Context, dir string, size uint64, read func(context.Context) ([]byte, error), write writeText) (f *os.File, spillErr, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.file != nil {
		return t.file, nil, nil
	}
	if t.opens > 1 {
		// An open of this set is served from memory (its spill failed):
		// the kernel would refuse a passthrough open beside it (EIO).
		return nil, nil, nil
	}
	if t.data == nil && write != nil {
		// Written straight to the file, a few MiB at a time, where the
		// store can (a fulltext): never whole in memory.
		f, err := spill.Text(ctx, dir, size, write)
		if err != nil {
			return nil, nil, err // the store's error
		}
		if f != nil {
			t.file = f
			freeSoon() // the copy's buffers, a few MiB to tens
			return f, nil, nil
		}
	}
	b := t.data
	if b == nil {
		if b, err = read(ctx); err != nil {
			return nil, nil, err
		}
	}
	if f, spillErr = writeUnlinked(dir, b); spillErr != nil {
		t.data = b
		return nil, spillErr, nil
	}
	t.file, t.data = f, nil
	freeSoon()
	return f, nil, nil
}

// writeText writes a revision's text to w, if the store can without
// holding it whole (ok), else writes nothing and reports !ok.
type writeText func(ctx context.Context, w io.WriterAt) (ok bool, err error)

// writeUnlinked writes b to a new unlinked file in dir.
func writeUnlinked(dir string, b []byte) (*os.File, error) {
	f, err := spill.Open(dir, uint64(len(b)))
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// spilledOpen opens the text t of a read-only node for a handle: spilled
// to a file of dir if it is spillMin bytes or more and dir is set, which
// the handle then reads (or the kernel, through passthrough); in memory
// otherwise (nil), read at the handle's first read. write, if not nil,
// is tried first (see spill). The caller counted the open (t.open) and
// releases it if the returned error is not nil.
func (t *sharedText) spilledOpen(ctx context.Context, dir string, size uint64, log func(error), read func(context.Context) ([]byte, error), write writeText) (*os.File, error) {
	if size < spillMin || dir == "" {
		return nil, nil
	}
	f, spillErr, err := t.spill(ctx, dir, size, read, write)
	if spillErr != nil {
		log(spillErr)
	}
	return f, err
}

// readSpilled reads a spilled text for a handle the kernel did not open
// in passthrough mode.
func readSpilled(f *os.File, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := f.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, gofs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

// spillFd is a read-only handle's PassthroughFd: the spilled file's, if
// there is one and passthrough is on.
func spillFd(f *os.File, passthrough bool) (int, bool) {
	if f == nil || !passthrough {
		return -1, false
	}
	return int(f.Fd()), true
}
