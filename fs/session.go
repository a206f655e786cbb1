package fs

import (
	"fmt"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// session is what the live tree knows about the unrecorded changes of
// one file: it starts at the first writable open and ends with a report
// to the Recorder at the last writable close (or at fsync, which starts
// the next one at once).
type session struct {
	id    FileID
	ino   uint64
	dirty rangeSet
	kept  int64 // see Change.Kept
	whole bool  // a passthrough writer was open: ranges unknown
	// ptInPlace: a passthrough writer that did not start the file over
	// (no create, no O_TRUNC: one opened while another handle held the
	// inode in passthrough mode) was open. The kernel maps such a file's
	// live file itself, and a shared mapping kept past the close goes on
	// writing to it with no request reaching us, into pages no stat
	// shows moved (a write into a page dirtied before the close moves no
	// mtime): the file's next session reports it whole (a review lost
	// such bytes for good, the next session's ranges taken on a revision
	// without them). A writer that started the file over keeps the next
	// session's ranges (an untar's, a build's new files: the next
	// change of a big file costs its ranges, not the file).
	ptInPlace bool
	created   bool
	changed   bool
	sources   []FileRef
	uid       uint32 // the file's owner at the last report

	// baseline is the size and mtime when the session (re)started; a
	// passthrough writer changed the file if they moved.
	baseSize  int64
	baseMtime syscall.Timespec
}

// newSession starts a session on the open live file fd. st, if not
// nil, is fd's stat, taken by the caller (Create) since it opened fd;
// id, if not zero, is fd's FileID, which the caller (Create) gave it.
// Otherwise the file's FileID is read, or a fresh one is set, and
// assigned says so: the xattr moved the file's ctime.
func newSession(fd int, created bool, st *syscall.Stat_t, id FileID) (s *session, assigned bool) {
	if id.IsZero() {
		id, assigned = fdID(fd)
	}
	s = &session{id: id}
	if st != nil {
		s.rebaseTo(st) // fdID changes no size or mtime
	} else {
		s.rebase(fd)
	}
	s.created, s.changed = created, created
	return s, assigned
}

// rebase makes the current state of fd the session's starting point.
func (s *session) rebase(fd int) {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		st = syscall.Stat_t{Ino: s.ino, Size: s.baseSize, Mtim: s.baseMtime}
	}
	s.rebaseTo(&st)
}

// rebaseTo makes the state st the session's starting point.
func (s *session) rebaseTo(st *syscall.Stat_t) {
	s.ino, s.baseSize, s.baseMtime = st.Ino, st.Size, st.Mtim
	s.kept = s.baseSize
	s.dirty = rangeSet{}
	s.whole, s.created, s.changed, s.sources = false, false, false, nil
}

// wrote notes a write of n bytes at off.
func (s *session) wrote(off, n int64) {
	s.dirty.add(off, n)
	s.changed = true
}

// truncated notes that the file was cut or extended to size.
func (s *session) truncated(size int64) {
	s.kept = min(s.kept, size)
	s.dirty.clip(size)
	s.changed = true
}

func (s *session) moved(st *syscall.Stat_t) bool {
	return st.Size != s.baseSize || st.Mtim != s.baseMtime
}

// aroundSetattr runs setattr, which may set the mtime itself: writes a
// passthrough writer made before it are noted first (unless the session
// is known changed already), and the baseline follows the new mtime, so
// that utimens is not taken for a write. setattr fills out with the
// file's attributes after it, as go-fuse's LoopbackNode.Setattr does.
// A passthrough write that races setattr, after the first stat, and
// changes no size is not told from it (both move the mtime) and goes
// unseen until the writer's next change or fsync: the price of not
// recording every chmod, utimens or same-size truncation of a file open
// through passthrough as a revision.
func (s *session) aroundSetattr(path string, out *fuse.AttrOut, setattr func() syscall.Errno) syscall.Errno {
	var st syscall.Stat_t
	if s.whole && !s.changed && syscall.Lstat(path, &st) == nil && s.moved(&st) {
		s.changed = true
	}
	errno := setattr()
	switch {
	case !s.whole:
	case errno == 0:
		s.baseSize, s.baseMtime = int64(out.Size), syscall.Timespec{Sec: int64(out.Mtime), Nsec: int64(out.Mtimensec)}
	case syscall.Lstat(path, &st) == nil:
		s.baseSize, s.baseMtime = st.Size, st.Mtim
	}
	return errno
}

// report returns the Change for the session's state, with the file's
// size from st (fd's stat; nil if it failed); the caller attaches the
// live file (attachContent).
func (s *session) report(st *syscall.Stat_t, path string, fsync bool) Change {
	size := s.baseSize
	if st != nil {
		size, s.uid = st.Size, st.Uid
	}
	s.dirty.clip(size)
	c := Change{
		Path: path, ID: s.id, Ino: s.ino, Uid: s.uid,
		Dirty: s.dirty.ranges(), Kept: min(s.kept, size), Size: size,
		Whole: s.whole, New: s.created, Sources: s.sources, Fsync: fsync,
	}
	if c.New {
		c.Kept = 0
	}
	return c
}

// reopen opens the file behind fd again, read-only, through its
// /proc/self/fd link: it reaches the same inode whatever happens to its
// name (and a writer's descriptor may be write-only).
func reopen(fd int) *os.File {
	f, err := OpenRead(fmt.Sprintf("/proc/self/fd/%d", fd), 0)
	if err != nil {
		return nil
	}
	return f
}

// fstat returns the stat of fd, or nil if it fails.
func fstat(fd int) *syscall.Stat_t {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return nil
	}
	return &st
}
