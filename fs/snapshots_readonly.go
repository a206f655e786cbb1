package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// noNewEntries refuses, with EROFS, the operations that would add an entry
// to a read-only directory of the snapshot views (.snapshots itself, where
// only mkdir makes a snapshot, and every directory inside a snapshot).
type noNewEntries struct{}

func (noNewEntries) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (noNewEntries) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (noNewEntries) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (noNewEntries) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// nothingToSync answers fsync and fdatasync of a node of the read-only
// views (a file or a directory of .snapshots or .history, and those two
// directories themselves) with success: nothing of it is unwritten, as
// nothing of a file open read-only on a read-only file system is. A
// snapshot is durable when its mkdir returns. Without it go-fuse answers
// ENOTSUP, and programs that sync what they copy or read (coreutils'
// `sync FILE`) fail on the views.
type nothingToSync struct{}

func (nothingToSync) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	return 0
}
