// Package spill makes the unlinked scratch files that hold a text too big
// to keep in memory: a big revision rebuilt for its readers (package fs's
// views, deltafs cat and restore) or for a check (objstore's verify). A
// text in such a file is the page cache's, which the kernel reclaims, not
// the process's; the file goes with its last descriptor.
package spill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Slack is the room a file system must have beyond a text for it to be
// spilled there: a spill never takes the last GiB a store needs.
const Slack = 1 << 30

// Open makes a new unlinked file (O_TMPFILE) in dir for a text of size
// bytes, if dir's file system has room for it and Slack more.
func Open(dir string, size uint64) (*os.File, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, err
	}
	if avail := st.Bavail * uint64(st.Bsize); avail < size+Slack {
		return nil, fmt.Errorf("%d bytes free, not enough room for %d", avail, size)
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "spilled text"), nil
}

// Text has write (objstore.Store.WriteText of a revision) write a text of
// size bytes into a new unlinked file of dir, and returns that file. It
// returns a nil file and no error where that cannot be done: dir's file
// system has no room for the text and Slack more, or no O_TMPFILE, or
// fails a write (a full disk), or write reports it cannot write the text
// without holding it whole (ok false); the caller then reads the text
// into memory (objstore.Store.Get). err is write's own error (a corrupt
// record, a wrong hash, ctx's end).
func Text(ctx context.Context, dir string, size uint64, write func(context.Context, io.WriterAt) (ok bool, err error)) (*os.File, error) {
	f, err := Open(dir, size)
	if err != nil {
		return nil, nil
	}
	w := &writer{f: f}
	ok, err := write(ctx, w)
	switch {
	case ok && err == nil:
		return f, nil
	case ok && w.err == nil:
		f.Close()
		return nil, err
	}
	f.Close() // not such a text, or the file failed
	return nil, nil
}

// writer is the spill file for a Text's write, noting the file's own
// failure (a full disk) apart from the writer's. It reads back and cuts
// too (objstore.TextFile), so that a delta revision can be rebuilt in it.
type writer struct {
	f   *os.File
	err error
}

func (w *writer) WriteAt(b []byte, off int64) (int, error) {
	n, err := w.f.WriteAt(b, off)
	return n, w.failed(err)
}

func (w *writer) ReadAt(b []byte, off int64) (int, error) {
	n, err := w.f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		return n, err
	}
	return n, w.failed(err)
}

func (w *writer) Truncate(size int64) error { return w.failed(w.f.Truncate(size)) }

// failed notes err, the file's, if it is the first.
func (w *writer) failed(err error) error {
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}
