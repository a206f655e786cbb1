package fs

import (
	"context"
	"errors"
	"golang.org/x/sys/unix"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// histFile is the directory of the revisions of one live file: one
// read-only regular file per revision (histRev), oldest first. Listing it
// asks History for this file's revisions only, and keeps the listing:
// revisions are only ever added, so the next listing costs a count of the
// file's revisions (one index lookup) when nothing changed, and a lookup
// per new revision when a few were added.
type histFile struct {
	gofs.Inode
	histNoChange
	v *histView

	cacheMu sync.Mutex // held by an open from its listing to its reply (history_cache.go)

	mu   sync.Mutex
	id   FileID          // the live file ents lists
	file index.FileID    // the store file its revisions were in
	ents []fuse.DirEntry // its listing, shared read-only with open handles
	next int             // one past the newest revision number ents lists
	kc   dirCache        // what the kernel may have cached of it
}

// maxIncremental: up to this many revisions recorded since the previous
// listing are looked up one by one; more re-read the file's whole list.
const maxIncremental = 64

var (
	_ = (gofs.NodeGetattrer)((*histFile)(nil))
	_ = (gofs.NodeSetattrer)((*histFile)(nil))
	_ = (gofs.NodeLookuper)((*histFile)(nil))
	_ = (gofs.NodeOpendirHandler)((*histFile)(nil))
	_ = (gofs.NodeMkdirer)((*histFile)(nil))
	_ = (gofs.NodeCreater)((*histFile)(nil))
	_ = (gofs.NodeUnlinker)((*histFile)(nil))
	_ = (gofs.NodeRenamer)((*histFile)(nil))
)

// live returns the live file's status and FileID, both read through one
// descriptor opened with no symlink on the way (safe_ops.go): two
// lookups by path let a user who swapped files between them pair their
// own file's owner with another's FileID, and read that file's history.
func (f *histFile) live() (syscall.Stat_t, FileID, error) {
	var st syscall.Stat_t
	fd, err := f.v.openLive(f.EmbeddedInode(), unix.O_PATH)
	if err != nil {
		return st, FileID{}, err
	}
	defer syscall.Close(fd)
	if err := syscall.Fstat(fd, &st); err != nil {
		return st, FileID{}, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return st, FileID{}, syscall.ENOENT // replaced by something without history
	}
	return st, pathFdID(fd), nil
}

func (f *histFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	st, _, err := f.live()
	if err != nil {
		return toErrno(f.v.log, "history getattr", err)
	}
	histAttr(&st, histIno(histKindFile, st.Ino), &out.Attr)
	return 0
}

// OpendirHandle lists the file's revisions into a handle that declines
// READDIRPLUS's lookups, so that a plain ls of 10,000 revisions makes no
// node for any of them, and lets the kernel list them from its cache
// when that holds this listing (history_cache.go).
func (f *histFile) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	_, id, err := f.live()
	if err != nil {
		return nil, 0, toErrno(f.v.log, "history list", err)
	}
	if id.IsZero() || f.v.hist == nil {
		return &plainListHandle{listDir: listDir{ents: withDots(f.EmbeddedInode(), nil)}}, 0, 0 // never recorded
	}
	f.v.fsys.waitReleases(ctx, f.Path(f.v.root))
	f.cacheMu.Lock()
	defer f.cacheMu.Unlock()
	ents, err := f.listing(ctx, id)
	if err != nil {
		return nil, 0, snapErrno(f.v.log, "history list", err)
	}
	h := &revListHandle{f: f, ents: ents}
	copy(h.dots[:], withDots(f.EmbeddedInode(), nil))
	h.dots[0].Off, h.dots[1].Off = 1, 2
	return h, f.openFlags(h), 0
}

// revListHandle lists a file's revisions from the histFile's shared
// entries without copying them (a copy per entry per ls of 10,000
// revisions is garbage the mount's heap grows by): their Off is set, so
// go-fuse reads them and never writes to them. It declines READDIRPLUS's
// lookups as plainListHandle does.
type revListHandle struct {
	f       *histFile
	caching bool   // opened with FOPEN_CACHE_DIR
	gen     uint64 // the generation of ents (dirCache)

	mu   sync.Mutex
	dots [2]fuse.DirEntry // "." and "..", listed first
	ents []fuse.DirEntry
	i    int // the next entry: a dot below 2, else ents[i-2]
}

var (
	_ = (gofs.FileReaddirenter)((*revListHandle)(nil))
	_ = (gofs.FileSeekdirer)((*revListHandle)(nil))
	_ = (gofs.FileLookuper)((*revListHandle)(nil))
	_ = (gofs.FileReleasedirer)((*revListHandle)(nil))
)

// Releasedir notes that the kernel has taken every reply of h.
func (h *revListHandle) Releasedir(ctx context.Context, flags uint32) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.f.kc.released(h.caching, h.gen)
}

func (h *revListHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.i < len(h.dots) {
		h.i++
		return &h.dots[h.i-1], 0
	}
	if h.i-len(h.dots) >= len(h.ents) {
		return nil, 0
	}
	if h.i == len(h.dots) {
		h.f.v.fsys.histPasses.Add(1)
	}
	h.i++
	return &h.ents[h.i-1-len(h.dots)], 0
}

func (h *revListHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.i = int(min(off, uint64(len(h.dots)+len(h.ents))))
	return 0
}

func (h *revListHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.ENOENT
}

// listing returns the revisions of live file id as directory entries.
func (f *histFile) listing(ctx context.Context, id FileID) ([]fuse.DirEntry, error) {
	file, n, err := f.v.hist.Len(ctx, id)
	if err != nil {
		return nil, err
	}
	var stale []fuse.DirEntry
	defer func() { f.forget(stale) }() // after the unlock
	f.mu.Lock()
	defer f.mu.Unlock()
	have := -1
	if f.id == id && f.file == file {
		have = f.next // not len(f.ents): gc leaves gaps in the numbers
	} else if len(f.ents) > 0 {
		// The node lists another history than before: a live file that
		// took another's (a save's temp file renamed over it, or to
		// the path it left), or another file on the inode number. The
		// kernel keeps the names it looked up for an hour, and a name
		// of the new listing (number and second) may be one of the old:
		// it would open the old revision.
		stale = f.ents
	}
	switch {
	case have == n:
		return f.ents, nil
	case have > 0 && n > have && n-have <= maxIncremental && revWidth(n) == revWidth(have):
		ents := f.ents // appending past len never touches what handles read
		for rev := have; rev < n; rev++ {
			r, err := f.v.hist.Revision(ctx, id, index.Rev(rev))
			if errors.Is(err, index.ErrNotFound) {
				continue // a number gc left free
			}
			if err != nil {
				return nil, err
			}
			ents = append(ents, revEntry(revName(r, revWidth(n)), r, len(ents)))
		}
		f.ents, f.next = ents, n
		f.kc.changed()
		return ents, nil
	}
	revs, err := f.v.hist.Revisions(ctx, id)
	if err != nil {
		return nil, err
	}
	f.id, f.file, f.ents, f.next = id, file, revEntries(revs), 0
	if len(revs) > 0 {
		f.next = int(revs[len(revs)-1].ID.Rev) + 1
	}
	f.kc.changed()
	return f.ents, nil
}

// revEntries makes the directory entries of a file's revisions, their
// names cut from one string, built in place (no copy of 10,000 names).
func revEntries(revs []Revision) []fuse.DirEntry {
	if len(revs) == 0 {
		return nil
	}
	width := revWidth(int(revs[len(revs)-1].ID.Rev) + 1)
	var b strings.Builder
	b.Grow(len(revs) * (width + 1 + len(revTimeFmt)))
	var name [64]byte
	ends := make([]int, len(revs))
	for i, r := range revs {
		b.Write(appendRevName(name[:0], r, width))
		ends[i] = b.Len()
	}
	all, start := b.String(), 0
	ents := make([]fuse.DirEntry, len(revs))
	for i, r := range revs {
		ents[i] = revEntry(all[start:ends[i]], r, i)
		start = ends[i]
	}
	return ents
}

// revEntry is the directory entry of r, entry i of its listing.
func revEntry(name string, r Revision, i int) fuse.DirEntry {
	return fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: histIno(histKindRev, revKey(r.ID)), Off: uint64(i) + 3} // after "." and ".."
}

// Lookup finds a revision by its name; the number may have any padding,
// the time must be the revision's.
func (f *histFile) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer uncachedMiss(out, &errno) // names appear with revisions
	rev, when, ok := parseRevName(name)
	if !ok || f.v.hist == nil {
		return nil, syscall.ENOENT
	}
	st, id, err := f.live()
	if err != nil {
		return nil, toErrno(f.v.log, "history lookup", err)
	}
	if id.IsZero() {
		return nil, syscall.ENOENT
	}
	f.v.fsys.waitReleases(ctx, f.Path(f.v.root))
	r, err := f.v.hist.Revision(ctx, id, rev)
	if err != nil {
		return nil, snapErrno(f.v.log, "history lookup", err)
	}
	if when != time.Unix(0, r.Time).UTC().Format(revTimeFmt) {
		return nil, syscall.ENOENT
	}
	n := &histRev{v: f.v, r: r, uid: st.Uid, gid: st.Gid}
	n.fill(&out.Attr)
	out.SetEntryTimeout(viewTimeout)
	out.SetAttrTimeout(viewTimeout)
	return f.NewInode(ctx, n, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: n.ino()}), 0
}

// histRev is one revision of a file: read-only, its size and time those
// of the revision, its owner the live file's. Its content is read from
// the store at the first read of an open (at the open for a big one,
// spill.go) and dropped when the last open of it is released: opens of
// one revision share one copy, and nothing is kept for a revision no
// one has open.
type histRev struct {
	gofs.Inode
	histReadOnly
	v        *histView
	r        Revision
	uid, gid uint32

	text sharedText
}

var (
	_ = (gofs.NodeGetattrer)((*histRev)(nil))
	_ = (gofs.NodeSetattrer)((*histRev)(nil))
	_ = (gofs.NodeOpener)((*histRev)(nil))
	_ = (gofs.NodeSetxattrer)((*histRev)(nil))
	_ = (gofs.FileReader)((*histHandle)(nil))
	_ = (gofs.FileReleaser)((*histHandle)(nil))
	_ = (gofs.FilePassthroughFder)((*histHandle)(nil))
)

func (n *histRev) ino() uint64 { return histIno(histKindRev, revKey(n.r.ID)) }

func (n *histRev) fill(a *fuse.Attr) {
	a.Ino = n.ino()
	a.Mode = syscall.S_IFREG | 0o400 // the owner's only: see histAttr
	a.Nlink = 1
	a.Uid, a.Gid = n.uid, n.gid
	a.Size = n.r.Size
	a.Blksize = 4096
	a.Blocks = (n.r.Size + 511) / 512
	t := time.Unix(0, n.r.Time)
	a.SetTimes(&t, &t, &t)
}

func (n *histRev) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fill(&out.Attr)
	out.SetTimeout(viewTimeout)
	return 0
}

// Open refuses writing; the content never changes, so the kernel may
// keep its page cache.
func (n *histRev) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	n.text.open()
	logSpill := func(err error) { n.v.log.Warn("revision kept in memory", "rev", n.r.ID, "size", n.r.Size, "err", err) }
	spill, err := n.text.spilledOpen(ctx, n.v.fsys.live, n.r.Size, logSpill, n.read, textWriter(n.v.hist, n.r.ID))
	if err != nil {
		n.text.release()
		return nil, 0, snapErrno(n.v.log, "history open", err)
	}
	return &histHandle{n: n, spill: spill}, fuse.FOPEN_KEEP_CACHE, 0
}

// read rebuilds the revision from the store.
func (n *histRev) read(ctx context.Context) ([]byte, error) { return n.v.hist.Read(ctx, n.r.ID) }

// content returns the revision's bytes, reading them at the first call
// of the current opens.
func (n *histRev) content(ctx context.Context) ([]byte, error) {
	return n.text.get(ctx, n.r.Size, n.read)
}

// histHandle is an open revision; spill is its text if spilled
// (spill.go).
type histHandle struct {
	n        *histRev
	spill    *os.File
	released sync.Once
}

// PassthroughFd lets the kernel read a spilled text itself.
func (h *histHandle) PassthroughFd() (int, bool) {
	return spillFd(h.spill, h.n.v.fsys.passthrough.Load())
}

func (h *histHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.spill != nil {
		return readSpilled(h.spill, dest, off)
	}
	data, err := h.n.content(ctx)
	if err != nil {
		return nil, snapErrno(h.n.v.log, "history read", err)
	}
	if off >= int64(len(data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(data)))
	return fuse.ReadResultData(data[off:end]), 0
}

// Release drops the content with the last open.
func (h *histHandle) Release(ctx context.Context) syscall.Errno {
	h.released.Do(h.n.text.release)
	return 0
}

// forget has the kernel drop the names of ents, an earlier listing,
// so that each is looked up again. It runs in the handler of an OPENDIR
// of f, which holds no lock of the kernel's on f (an entry invalidation
// takes f's).
func (f *histFile) forget(ents []fuse.DirEntry) {
	for _, e := range ents {
		f.NotifyEntry(e.Name)
	}
}
