package fs

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxContentFds caps the Changes that carry an open descriptor of their
// live file (Change.Content). A recorder that falls behind (an untar of
// 100,000 files) would otherwise hold one descriptor per pending change
// and run the server out of them (EMFILE, seen creating a 100,000-file
// tree). Past the cap a Change carries the file's handle
// (name_to_handle_at(2)), which costs no descriptor, and the recorder
// opens it when it gets to the change (Change.Open).
const maxContentFds = 512

// contentRef says how a Change reaches its live file when it carries no
// open descriptor: by file handle from the live directory's descriptor,
// or, where handles do not work (not root), by path, checked against the
// FileID.
type contentRef struct {
	rootFd int // O_PATH, for openat2 by path
	dirFd  int // for open_by_handle_at
	handle *unix.FileHandle
	rel    string // live-tree relative path at the report
	held   *atomic.Int64
	data   *atomic.Int64 // FS.captured, for a Change carrying Data

	// Set for a reference-only Change (see refTable): the file opened by
	// keepRemoved before its last name went away.
	refs    *refTable
	ino     uint64
	kept    atomic.Pointer[os.File]
	counted atomic.Bool // kept was counted in refs.kept
}

// attachContent gives c the live file fd refers to: an open descriptor
// while fewer than maxContentFds Changes hold one, else a reference.
func (f *FS) attachContent(c *Change, fd int) {
	c.Report = f.reports.Add(1)
	if f.captureSmallNew(c, fd) {
		return
	}
	if f.contentFds.Add(1) <= maxContentFds {
		if c.Content = reopen(fd); c.Content != nil {
			c.ref = &contentRef{held: &f.contentFds}
			return
		}
	}
	f.contentFds.Add(-1)
	ref := &contentRef{rootFd: f.rootFd, dirFd: f.dirFd, rel: c.Path}
	if h, _, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH); err == nil {
		ref.handle = &h
	}
	f.refs.add(c.Ino, ref)
	c.ref = ref
}

// Open returns the live file of the change, read-only: c.Content when the
// change carries it, else the file opened again by handle or (failing
// that) by path, checked to be the same file (ID and inode). The file is
// c's: c.Close closes it.
func (c *Change) Open() (*os.File, error) {
	if c.Content != nil {
		return c.Content, nil
	}
	r := c.ref
	if r == nil {
		return nil, errors.New("live file not reopened")
	}
	if c.Data != nil {
		return nil, errors.New("live file not reopened: the change carries its content (Data)")
	}
	if kept := r.kept.Swap(nil); kept != nil { // its last name is gone
		c.Content = kept
		return kept, nil
	}
	if r.handle != nil {
		fd, err := withNoAtime(syscall.O_RDONLY|syscall.O_CLOEXEC, func(flags int) (int, error) {
			return unix.OpenByHandleAt(r.dirFd, *r.handle, flags)
		})
		if err == nil {
			c.Content = os.NewFile(uintptr(fd), c.Path)
			return c.Content, nil
		}
		if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EBADF) && !errors.Is(err, syscall.EINVAL) {
			return nil, fmt.Errorf("open by handle: %w", err)
		}
	}
	return c.openByPath()
}

// openByPath opens the change's path in the live directory and checks
// that it is still the reported file.
func (c *Change) openByPath() (*os.File, error) {
	rel := c.ref.rel
	if rel == "" {
		rel = "."
	}
	fd, err := withNoAtime(syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, func(flags int) (int, error) {
		how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH}
		return unix.Openat2(c.ref.rootFd, rel, &how)
	})
	if err != nil {
		return nil, fmt.Errorf("open by path: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Ino != c.Ino || (!c.ID.IsZero() && fdIDOnly(fd) != c.ID) {
		syscall.Close(fd)
		return nil, fmt.Errorf("open by path: %s is no longer the reported file", c.Path)
	}
	c.Content = os.NewFile(uintptr(fd), c.Path)
	return c.Content, nil
}

// Close closes the live file of c, if open, and forgets how to open it.
func (c *Change) Close() {
	if c.ref != nil && c.ref.data != nil {
		c.ref.data.Add(-int64(len(c.Data)))
		c.ref.data = nil
	}
	c.Data = nil
	if c.Content != nil {
		_ = c.Content.Close()
		c.Content = nil
	}
	if c.ref != nil && c.ref.held != nil {
		c.ref.held.Add(-1)
		c.ref.held = nil
	}
	if c.ref != nil && c.ref.refs != nil {
		c.ref.refs.drop(c.ref)
	}
	c.ref = nil
}

// fdIDOnly returns the FileID of fd without assigning one.
func fdIDOnly(fd int) FileID {
	var id FileID
	if sz, err := unix.Fgetxattr(fd, XattrID, id[:]); err != nil || sz != len(id) {
		return FileID{}
	}
	return id
}
