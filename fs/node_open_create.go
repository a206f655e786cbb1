package fs

import (
	"context"
	"os"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Open opens the live file. See ioMode for which kind of handle it gets.
func (n *Node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	appending := flags&syscall.O_APPEND != 0
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC // the kernel sends offsets
	rel := n.relPath()
	if rel == "" {
		// Unlinked or renamed over since the kernel looked it up: its
		// name now belongs to another file (or none).
		return nil, 0, syscall.ENOENT
	}
	if isWritable(flags) {
		// A writer closed just before (`echo a > f; echo b > f`) may not
		// be released yet (the kernel sends RELEASE after close(2)
		// returns): its change is reported at the release, or this open
		// would join its session and the two make one revision.
		waitZero(ctx, &n.closing, &n.closedAt, openClosingWait)
		if errno := n.waitRecorded(ctx); errno != 0 {
			return nil, 0, errno
		}
	}
	p := n.livePath()
	if flags&syscall.O_TRUNC != 0 && !isWritable(flags) {
		flags &^= syscall.O_TRUNC
		if errno := n.truncateReadOnlyOpen(ctx); errno != 0 {
			return nil, 0, errno
		}
	}
	truncFrom := int64(-1)
	if flags&syscall.O_TRUNC != 0 && isWritable(flags) {
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil {
			truncFrom = st.Size
		}
	}
	fd, err := n.fsys.openLive(rel, int(flags&^syscall.O_TRUNC), 0)
	if err == syscall.EPERM && appending && isWritable(flags) {
		// An append-only file (chattr +a) opens for writing with
		// O_APPEND only; its writes, at the end the kernel sends, land
		// there.
		fd, err = n.fsys.openLive(rel, int(flags&^syscall.O_TRUNC)|syscall.O_APPEND, 0)
	}
	if err != nil {
		return nil, 0, n.fsys.errno("open", err)
	}
	watch := isWritable(flags) && n.writesDropPrivs(ctx, fd)
	if isWritable(flags) && flags&syscall.O_TRUNC == 0 {
		n.awaitCachedMode(ctx, fd) // see iomode_wait.go
	}
	if isWritable(flags) {
		n.fsys.hold() // joining the writers, maybe giving the file its FileID (freeze.go)
	}
	fh := n.openHandle(fd, flags, nil, FileID{}, truncFrom, watch)
	if isWritable(flags) {
		n.fsys.unhold()
	}
	_, pt := fh.(*passthroughHandle)
	if pt && isWritable(flags) {
		// Journaled (Dirtied) in openHandle, which kept a held change
		// held; one queued since the wait above must be read before
		// writes we never see go on.
		if errno := n.waitRecorded(ctx); errno != 0 {
			fh.(gofs.FileReleaser).Release(ctx)
			return nil, 0, errno
		}
	}
	truncate := flags&syscall.O_TRUNC != 0
	if truncate {
		if errno := n.truncateOpened(ctx, fd); errno != 0 {
			fh.(gofs.FileReleaser).Release(ctx)
			return nil, 0, errno
		}
	}
	if pt && watch || truncate && watch {
		// The inode is in passthrough mode: its writes will not reach
		// us, so the bits go now; and a truncation drops them as a
		// write does (see killpriv.go).
		n.fsys.hold()
		errno := n.killPrivsFd(fd)
		n.fsys.unhold()
		if errno != 0 {
			fh.(gofs.FileReleaser).Release(ctx)
			return nil, 0, errno
		}
	}
	return fh, 0, 0
}

// writesDropPrivs reports whether the caller of ctx writing the live file
// fd must drop its setuid and setgid bits (see killpriv.go).
func (n *Node) writesDropPrivs(ctx context.Context, fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && mustDropPrivs(ctx, st.Mode)
}

// truncateOpened truncates the file of an O_TRUNC open, once its handle
// has joined the write session. Not in open(2) itself: the previous
// writer's RELEASE, which reports its change, is asynchronous and may
// arrive after Open's wait for it and waitRecorded and before the
// session is joined (a handle kept by a dup looks the same); then the
// recorder reads that change from the live file, so the truncation waits
// until it has (once the session is joined, a late RELEASE merges into
// it instead of reporting). The session is journaled (Dirtied) first.
func (n *Node) truncateOpened(ctx context.Context, fd int) syscall.Errno {
	if st := fstat(fd); st != nil && st.Size == 0 {
		return 0 // nothing to truncate, nothing to journal
	}
	n.mu.Lock()
	if n.sess != nil { // joined by openHandle
		n.dirtyingLocked() // journaled before the live file changes
	}
	n.mu.Unlock()
	// Dirtied first, then the wait: a held change is kept held by Dirtied
	// (and merges with this session's report), a queued one is read
	// before the truncation.
	if errno := n.waitRecorded(ctx); errno != 0 {
		return errno
	}
	n.fsys.hold() // after the wait (freeze.go)
	defer n.fsys.unhold()
	if err := syscall.Ftruncate(fd, 0); err != nil {
		return n.fsys.errno("open", err)
	}
	return 0
}

// truncateReadOnlyOpen truncates the file of an O_RDONLY|O_TRUNC open
// (Linux truncates then, with CAP_ATOMIC_O_TRUNC by our hand): a
// read-only handle starts no write session, so the truncation is
// reported as a truncate(2) by path is.
func (n *Node) truncateReadOnlyOpen(ctx context.Context) syscall.Errno {
	// Through a descriptor opened with no symlink on the way, held from
	// the stat to the truncation (safe_ops.go): by path, a symlink
	// swapped in meanwhile made a root server truncate a file outside
	// the tree (a review did so from an unprivileged account).
	fd, err := n.openSelf()
	if err != nil {
		return 0 // the open reports a missing file (or the symlink)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Size == 0 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	n.dirtyingPath() // first: see truncateOpened
	if errno := n.waitRecorded(ctx); errno != 0 {
		return errno
	}
	n.fsys.hold() // after the wait (freeze.go)
	defer n.fsys.unhold()
	if err := syscall.Truncate(procFd(fd), 0); err != nil {
		return n.fsys.errno("open", err)
	}
	n.truncatedByPath(st.Size, 0)
	return 0
}

// Create creates and opens a live file.
func (n *Node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if n.reserved(name) {
		return nil, nil, 0, syscall.EEXIST
	}
	n.fsys.hold() // it waits for nothing (freeze.go)
	defer n.fsys.unhold()
	flags &^= syscall.O_APPEND
	// Exclusive first, so that it is known whether this open made the
	// file (the kernel asks to create a name it found missing; one that
	// appeared meanwhile is opened as it is, its mode untouched).
	rel, cflags := n.childRel(name), n.fsys.createFlags(int(flags))
	created := true
	fd, err := n.fsys.openLive(rel, cflags|syscall.O_CREAT|syscall.O_EXCL, mode|ownerNeeds)
	if err == syscall.EEXIST && flags&syscall.O_EXCL == 0 {
		created = false
		fd, err = n.fsys.openLive(rel, cflags|syscall.O_CREAT, mode)
		if err == syscall.EACCES && cflags != int(flags) {
			fd, err = n.fsys.openLive(rel, int(flags)|syscall.O_CREAT, mode) // an existing file we may not read
		}
	}
	if err != nil {
		return nil, nil, 0, n.fsys.errno("create", err)
	}
	id := newFdID(fd) // before the stat: the xattr moves the ctime (see cache.go)
	st, attr, err := n.fsys.fstatStable(fd)
	if err == nil && created {
		lost, added := n.umaskLost(mode, st.Mode, st.Gid), ownerNeeds&^mode&st.Mode
		if (lost != 0 || added != 0) && n.fsys.restoreMode("", fd, (st.Mode|lost)&^added, st.Mode) == nil {
			st, attr, err = n.fsys.fstatStable(fd) // see umask.go
		}
	}
	if err == nil && created && n.chownToCaller(ctx, fd, mode, &st) {
		st, attr, err = n.fsys.fstatStable(fd) // the chown moved the ctime too
	}
	if err != nil {
		syscall.Close(fd)
		return nil, nil, 0, n.fsys.errno("create", err)
	}
	out.FromStat(&st)
	n.touchChild(st.Ino)
	ch := n.NewInode(ctx, n.fsys.newNode(nil, nil, "", &st), attr)
	liveEntry(ch, out)
	child := ch.Operations().(*Node)
	if flags&syscall.O_EXCL != 0 {
		child.noCap.Store(true) // made by this open: no attributes but our own
	}
	child.mu.Lock()
	child.createdAt = rel
	child.mu.Unlock()
	return ch, child.openHandle(fd, flags, &st, id, -1, mustDropPrivs(ctx, st.Mode)), 0, 0
}

// Tmpfile (O_TMPFILE) is not offered: a nameless file could be linked
// into the tree later by a descriptor the live tree never saw opened.
// Programs fall back to a named temporary file.
func (n *Node) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// serverUID and serverGID are this process's user and effective group,
// asked once: Create checks them for every new file.
var (
	serverUID = os.Getuid()
	serverGID = uint32(os.Getegid())
)

// chownToCaller gives a new file in n, whose attributes are st, to the
// calling user when the server runs as root (as the kernel would for a
// local file), and reports whether it changed the file. A file the
// caller owns already (root untarring as root: every file of it) is left
// alone: a chown per created file is a syscall and an inode update on
// the request path. The chown drops setuid and setgid, so the bits of
// mode the kernel let through (it strips a setgid the caller may not
// set) are put back.
func (n *Node) chownToCaller(ctx context.Context, fd int, mode uint32, st *syscall.Stat_t) bool {
	if serverUID != 0 {
		return false
	}
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return false
	}
	gid := int(caller.Gid)
	if st.Uid == caller.Uid && st.Gid == caller.Gid {
		return false
	}
	if n.keepsGroup(st.Gid) {
		gid = int(st.Gid)
	}
	if st.Uid == caller.Uid && st.Gid == uint32(gid) {
		return false
	}
	if syscall.Fchown(fd, int(caller.Uid), gid) != nil {
		return false
	}
	if special := mode & (syscall.S_ISUID | syscall.S_ISGID); special != 0 {
		_ = syscall.Fchmod(fd, st.Mode&0o7777&^(syscall.S_ISUID|syscall.S_ISGID)|special)
	}
	return true
}

// keepsGroup reports whether the group gid the kernel gave a new file
// in n, made by this server, is the one it would give the caller's: the
// group of n when n is setgid (whatever that group is, ours included),
// or any group other than ours (a live filesystem mounted grpid gives
// the directory's group without the bit). Only a file of our own group
// in a directory without the bit needs the parent's mode read.
func (n *Node) keepsGroup(gid uint32) bool {
	if gid != serverGID {
		return true
	}
	dfd, err := n.openDir() // no symlink on the way (safe_ops.go)
	if err != nil {
		return false
	}
	defer syscall.Close(dfd)
	var dir syscall.Stat_t
	return syscall.Fstat(dfd, &dir) == nil && dir.Mode&syscall.S_ISGID != 0
}

func isWritable(flags uint32) bool { return flags&syscall.O_ACCMODE != syscall.O_RDONLY }

// ioMode decides, with n.mu held, whether a new handle uses passthrough.
// fresh is set for a writable open that starts the file over (Create or
// O_TRUNC). The kernel refuses to mix cached and passthrough handles on
// one inode, so:
//   - a read-only open uses passthrough unless a cached handle is open;
//   - a fresh writable open uses passthrough too, on the same condition:
//     its change is recorded whole anyway (no previous text, or one that
//     it rewrites), so its ranges are worth nothing and its writes need
//     not cross the server;
//   - any other writable open uses the cached mode (we see its writes)
//     unless a passthrough handle is open, in which case it must use
//     passthrough too.
//
// A writable passthrough handle makes its session Whole (written ranges
// unknown, change detected by size and mtime).
//
// The kernel leaves a released file's mode only after our RELEASE reply
// reaches it, so a handle released less than ioModeGrace ago still
// counts: an open in the other mode in that window would fail with EIO
// (seen in the model test under -race).
func (n *Node) ioMode(writable, fresh bool) (passthrough bool) {
	now := time.Now()
	if writable && (n.passed > 0 || now.Sub(n.passedReleased) < ioModeGrace) {
		return true
	}
	if writable && !fresh {
		return false
	}
	return n.cached == 0 && now.Sub(n.cachedReleased) >= ioModeGrace && n.fsys.passthrough.Load()
}

// ioModeGrace is how long a released handle's I/O mode is still assumed
// to hold in the kernel. The kernel drops the mode while it takes in our
// reply, microseconds after the count drops here unless the replying
// goroutine is descheduled (seen for milliseconds under -race on a loaded
// machine). The price of a long grace: a file opened read-only within it
// after a write is read through the server for the life of that handle,
// and one opened for writing within it after a read loses its written
// ranges.
const ioModeGrace = 20 * time.Millisecond

// openHandle wraps the opened live file fd in a handle of the right mode
// and starts or joins the node's write session. created is fd's stat
// when Create made the file (nil otherwise), id the FileID Create gave
// it; truncFrom is the size before an O_TRUNC open (-1 if none). watch
// is set for a writer whose writes must reach us (they drop the file's
// setuid bit, see killpriv.go): it gets passthrough only where the
// inode forces it.
func (n *Node) openHandle(fd int, flags uint32, created *syscall.Stat_t, id FileID, truncFrom int64, watch bool) gofs.FileHandle {
	writable := isWritable(flags)
	n.mu.Lock()
	defer n.mu.Unlock()
	// O_TRUNC reaches Open because Options asks for CAP_ATOMIC_O_TRUNC;
	// a kernel without it sends a plain OPEN and then a SETATTR of size 0
	// on the handle, which keeps the cached mode.
	pt := n.ioMode(writable, (created != nil || flags&syscall.O_TRUNC != 0) && !watch)
	if writable {
		n.joinSession(fd, created, id, pt, truncFrom)
	}
	file := osFile(fd, n.Path(nil))
	lf := gofs.NewLoopbackFileFromOS(file)
	if writable {
		n.fsys.open.added(fd, n, pt, file)
	}
	if pt {
		n.passed++
		return &passthroughHandle{LoopbackFile: lf, n: n, fd: fd, writable: writable}
	}
	n.cached++
	return &handle{n: n, lf: lf, fd: fd, writable: writable}
}

// joinSession counts a new writer, with n.mu held. id is the FileID
// Create gave the file (zero otherwise).
func (n *Node) joinSession(fd int, created *syscall.Stat_t, id FileID, pt bool, truncFrom int64) {
	if n.writers == 0 {
		n.startedWriting()
	}
	n.writers++
	if n.sess == nil {
		var assigned bool
		n.sess, assigned = newSession(fd, created != nil, created, id)
		if assigned {
			_ = n.NotifyContent(-1, 0) // the kernel's ctime (attributes only)
		}
		if n.wholeNext && created == nil {
			n.sess.whole = true // see session.ptInPlace
		}
		n.wholeNext = false
	}
	if truncFrom > 0 {
		n.sess.truncated(0)
	}
	if pt {
		n.sess.whole = true
		n.sess.ptInPlace = n.sess.ptInPlace || created == nil && truncFrom < 0
		n.dirtyingLocked() // its writes bypass us
	}
}

// released is called by a handle before it closes fd.
func (n *Node) released(fd int, passthrough, writable bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if writable {
		n.fsys.open.removed(fd)
	}
	if passthrough {
		n.passed--
		n.passedReleased = time.Now()
	} else {
		n.cached--
		n.cachedReleased = time.Now()
	}
	if !writable {
		return
	}
	n.writers--
	if n.writers == 0 {
		n.stoppedWriting()
	}
	if n.writers > 0 || n.sess == nil {
		return
	}
	n.wholeNext = n.sess.ptInPlace
	if !n.report(fd, false) {
		if n.dirtied.Load() {
			n.undirtied(n.sess.id) // a passthrough writer that wrote nothing
		}
		if c, ok := n.fsys.rec.(CloseNoter); ok {
			c.Closed(n.sess.id) // what its last fsync reported is a closed change
		}
	}
	n.sess = nil
	n.sessionEnded()
}

// fsync is fsync(2) through a handle of n on fd. The changes so far are
// handed to the recorder before the live file is flushed, so that their
// recording (reading the page cache, compressing, the store's own writes
// and fsync) runs while the kernel writes the live file back; the call
// returns once both are done. The recorder never needed the live file on
// disk: it reads the same pages a revision recorded at close does. A
// failed flush returns its error at once; the recording goes on.
func (n *Node) fsync(ctx context.Context, fd int) syscall.Errno {
	id, wait := n.fsyncReport(fd)
	if err := syscall.Fsync(fd); err != nil {
		return n.fsys.errno("fsync", err)
	}
	if !wait {
		return 0
	}
	return n.fsys.errno("fsync", n.fsys.rec.Wait(ctx, id))
}

// fsyncReport reports the changes so far and starts the next session;
// wait says whether the fsync must wait for the recorder to record file
// id's reports.
func (n *Node) fsyncReport(fd int) (id FileID, wait bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sess == nil {
		return id, false
	}
	reported := n.report(fd, true)
	id = n.sess.id
	if reported {
		// With nothing reported the session goes on, its Dirtied
		// still covering it: a second Dirtied would leave the file
		// journaled with no report to clear it.
		n.sess.rebase(fd)
		n.sess.whole = n.passed > 0
		n.sessionEnded()
		if n.sess.whole {
			n.dirtyingLocked() // a passthrough writer is still open
		}
	}
	// With nothing new to report, an earlier report may still be queued:
	// an fsync retried after EINTR (Go's os.File.Sync retries) must not
	// return before the revision the interrupted one reported.
	return id, reported || n.reported == id
}

// report tells the Recorder about the session's change, if any, with
// n.mu held (so one file's reports keep their order).
func (n *Node) report(fd int, fsync bool) bool {
	s := n.sess
	st := fstat(fd)
	n.invalidateIfMoved(st) // a passthrough writer's mmap (see cache.go)
	if s.whole && (st == nil || s.moved(st)) {
		s.changed = true // by a passthrough writer: we saw no write
	}
	if !s.changed {
		return false
	}
	path := n.relPath()
	if p := n.unlinkedAs.Load(); path == "" && !n.isRoot() && p != nil {
		path = *p
	}
	c := s.report(st, path, fsync)
	n.fsys.attachContent(&c, fd)
	n.fsys.rec.Changed(c)
	n.reported = s.id
	return true
}

// wrote notes a write through a handle of n.
func (n *Node) wrote(off, cnt int64) {
	n.mu.Lock()
	if n.sess != nil {
		n.dirtyingLocked()
		n.sess.wrote(off, cnt)
	}
	n.mu.Unlock()
}

// truncatedOpen notes a truncation through an open handle.
func (n *Node) truncatedOpen(size int64) {
	n.mu.Lock()
	if n.sess != nil {
		n.dirtyingLocked()
		n.sess.truncated(size)
	}
	n.mu.Unlock()
}
