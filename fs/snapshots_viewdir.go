package fs

import (
	"context"
	"os"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// viewDir is a directory inside a snapshot.
type viewDir struct {
	viewNode
	noNewEntries
}

func (d *viewDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	t, err := d.v.tree(ctx, d.e.Tree)
	if err != nil {
		return nil, snapErrno(d.v.log, "lookup", err)
	}
	e, ok := t.Lookup(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	fillAttr(d.snap, &e, &out.Attr)
	out.SetEntryTimeout(viewTimeout)
	out.SetAttrTimeout(viewTimeout)
	return d.v.newNode(ctx, d.EmbeddedInode(), d.snap, e), 0
}

func (d *viewDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	t, err := d.v.tree(ctx, d.e.Tree)
	if err != nil {
		return nil, snapErrno(d.v.log, "readdir", err)
	}
	ents := make([]fuse.DirEntry, 2, len(t.Entries)+2) // "." and ".." first
	for _, e := range t.Entries {
		ents = append(ents, fuse.DirEntry{Name: e.Name, Mode: e.Mode, Ino: viewIno(d.snap, e.Ino)})
	}
	copy(ents, withDots(d.EmbeddedInode(), nil))
	return gofs.NewListDirStream(ents), 0
}

func (d *viewDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *viewDir) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (d *viewDir) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (d *viewDir) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

// viewLink is a symlink inside a snapshot.
type viewLink struct {
	viewNode
}

func (l *viewLink) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	return []byte(l.e.Target), 0
}

// viewFile is a regular file inside a snapshot. Its content is read
// from the store (rebuilt) at the first read of an open, or at the open
// for a big one (spill.go), shared by the opens of the file and dropped
// with the last (sharedText); the kernel may keep its page cache, since
// it never changes. A file the snapshot lists with a size but no
// revision was too large to record: its open fails with EFBIG.
type viewFile struct {
	viewNode
	text sharedText
}

// viewHandle is an open snapshot file; spill is its text if spilled
// (spill.go).
type viewHandle struct {
	f        *viewFile
	spill    *os.File
	released sync.Once
}

var (
	_ = (gofs.FileReleaser)((*viewHandle)(nil))
	_ = (gofs.FilePassthroughFder)((*viewHandle)(nil))
)

// PassthroughFd lets the kernel read a spilled text itself.
func (h *viewHandle) PassthroughFd() (int, bool) {
	return spillFd(h.spill, h.f.v.passthrough != nil && h.f.v.passthrough())
}

func (f *viewFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	if f.e.Rev.IsNull() && f.e.Size > 0 {
		// Too large to record (Revisions.Revision): listed, not held.
		f.v.log.Warn("snapshot file not recorded: larger than a revision may be", "size", f.e.Size, "name", f.e.Name)
		return nil, 0, syscall.EFBIG
	}
	f.text.open()
	logSpill := func(err error) {
		f.v.log.Warn("snapshot file kept in memory", "name", f.e.Name, "size", f.e.Size, "err", err)
	}
	spill, err := f.text.spilledOpen(ctx, f.v.spillDir, f.e.Size, logSpill, f.read, textWriter(f.v.snaps, f.e.Rev))
	if err != nil {
		f.text.release()
		return nil, 0, snapErrno(f.v.log, "open", err)
	}
	return &viewHandle{f: f, spill: spill}, fuse.FOPEN_KEEP_CACHE, 0
}

// read rebuilds the file's content from the store.
func (f *viewFile) read(ctx context.Context) ([]byte, error) { return f.v.snaps.Read(ctx, f.e.Rev) }

// content returns the file's bytes, reading them at the first call of
// the current opens.
func (f *viewFile) content(ctx context.Context) ([]byte, error) {
	if f.e.Rev.IsNull() {
		return nil, nil
	}
	return f.text.get(ctx, f.e.Size, f.read)
}

func (f *viewFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*viewHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	if h.spill != nil {
		return readSpilled(h.spill, dest, off)
	}
	data, err := f.content(ctx)
	if err != nil {
		return nil, snapErrno(f.v.log, "read", err)
	}
	if off >= int64(len(data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(data)))
	return fuse.ReadResultData(data[off:end]), 0
}

// Release drops the content with the file's last open.
func (h *viewHandle) Release(ctx context.Context) syscall.Errno {
	h.released.Do(h.f.text.release)
	return 0
}
