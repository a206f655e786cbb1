package fs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
)

// Snapshots is what the .snapshots directory needs from the mount: the
// snapshot records, their trees and file contents, and creating, deleting
// and renaming snapshots (the mount builds a snapshot with a TreeBuilder
// and stores it). fs defines it so that it never imports the store.
type Snapshots interface {
	List(ctx context.Context) ([]index.Snapshot, error)
	Get(ctx context.Context, name string) (index.Snapshot, error)
	Create(ctx context.Context, name string) (index.Snapshot, error)
	Delete(ctx context.Context, name string) error
	Rename(ctx context.Context, from, to string) error
	Tree(ctx context.Context, h index.TreeHash) (*index.Tree, error)
	Read(ctx context.Context, id index.RevID) ([]byte, error)
}

// TextWriter is what a Snapshots or a History may also offer: write the
// content of revision id to w from offset 0 without holding it whole in
// memory, where it can (ok; else w is discarded, and Read is used). A
// big file's old text is copied into a file so (spill.go), which also
// reads back and cuts to length (objstore.TextFile), so that a delta
// can be applied over its base there.
type TextWriter interface {
	WriteText(ctx context.Context, id index.RevID, w io.WriterAt) (ok bool, err error)
}

// textWriter returns v's WriteText for revision id, or nil.
func textWriter(v any, id index.RevID) writeText {
	tw, ok := v.(TextWriter)
	if !ok {
		return nil
	}
	return func(ctx context.Context, w io.WriterAt) (bool, error) { return tw.WriteText(ctx, id, w) }
}

// SnapshotsChanged is what a Snapshots may also offer: when its list of
// snapshots last changed (a snapshot created, deleted or renamed, through
// .snapshots or not), or when it started; .snapshots shows the later of
// that and its own start as its times, not the epoch.
type SnapshotsChanged interface {
	Changed() time.Time
}

// snapErrno is toErrno with the snapshot errors of package index.
func snapErrno(log *slog.Logger, op string, err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, index.ErrExists):
		return syscall.EEXIST
	case errors.Is(err, index.ErrBadName):
		return syscall.EINVAL
	case errors.Is(err, index.ErrNotFound):
		return syscall.ENOENT
	case errors.Is(err, index.ErrDecode):
		return toErrno(log, op, errors.Join(ErrCorrupt, err))
	}
	return toErrno(log, op, err)
}

// viewIno gives a node of snapshot s the inode number of its live inode
// ino, mixed so that snapshots never share numbers with each other or the
// live tree: numbers fall in [2^62, 2^63), above the live filesystem's and
// below go-fuse's automatic ones, and hard links within a snapshot keep
// sharing one number.
func viewIno(s index.SnapshotID, ino uint64) uint64 {
	x := uint64(s)*0x9e3779b97f4a7c15 ^ ino
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	v := 1<<62 | x&(1<<62-1)
	if v == snapshotsIno {
		v++
	}
	return v
}
