package fs

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"syscall"
)

// ErrReadOnly is matched by errors.Is for a write to something that can
// only be read (a snapshot, a read-only mount); it becomes EROFS.
var ErrReadOnly = errors.New("read-only")

// ErrCorrupt is matched by errors.Is for stored bytes that fail their
// checks; it becomes EIO and one log line. Packages below fs wrap their
// own corruption errors so that they match it too, or implement
// Corrupt() bool.
var ErrCorrupt = errors.New("corrupt data")

// corrupter is implemented by corruption errors of other packages, so
// that fs need not import them.
type corrupter interface{ Corrupt() bool }

// toErrno turns err into the errno a FUSE operation returns. It is the
// only place that does so for errors of our own making (syscall errors
// from the live tree come back as syscall.Errno and pass through).
// go-fuse's own fs.ToErrno does not unwrap %w chains, hence this.
func toErrno(log *slog.Logger, op string, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	var c corrupter
	switch {
	case errors.Is(err, ErrReadOnly):
		return syscall.EROFS
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	case errors.Is(err, ErrCorrupt), errors.As(err, &c) && c.Corrupt():
		log.Error("corrupt data", "op", op, "err", err)
		return syscall.EIO
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	}
	log.Error("I/O error", "op", op, "err", err)
	return syscall.EIO
}
