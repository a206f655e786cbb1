package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// lockedSink serialises a storeSink between the recorder's goroutine and
// snapshots, which read and extend its id map.
type lockedSink struct {
	mu   sync.Mutex
	sink *storeSink
	// deferring is set while a snapshot's build holds mu with the live
	// tree frozen: the revisions it records are appended to the store
	// then (readable, and parents of later puts), and commits holds
	// their commits, which the snapshot runs once it has thawed the live
	// tree (snapshotter.hold), so that writers do not wait for the disk.
	deferring bool
	commits   []func() error
	// reserved holds store files made before a build for pending live
	// files that have none (reservePending); the build binds one where it
	// records the file's first revision.
	reserved map[fs.FileID]index.FileID
}

// commitDeferred ends deferring and runs the commits deferred, with mu
// held.
//
// The ids records the build appended are made durable first, with one
// fsync (liveRevs.record leaves it to here while deferring): a revision
// must not be durable before the mapping that names its store file. If
// that fsync fails, no commit is run here (the sink is broken then, see
// storeSink.idsFailed).
func (l *lockedSink) commitDeferred() error {
	var errs []error
	if l.sink != nil { // nil: a store opened read-only records nothing
		if err := l.sink.syncIDs(); err != nil {
			errs = append(errs, err)
			l.commits = nil
		}
	}
	for _, commit := range l.commits {
		errs = append(errs, commit())
	}
	l.deferring, l.commits, l.reserved = false, nil, nil
	return errors.Join(errs...)
}

func (l *lockedSink) Record(ctx context.Context, ev Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sink.Record(ctx, ev)
}

// Ignores implements IgnoringSink; it reads nothing the lock guards.
func (l *lockedSink) Ignores(ev Event) bool { return l.sink.Ignores(ev) }

// liveRevs is the fs.Revisions of snapshots: it names the revision that
// holds a live file's content. Normally that is the file's newest
// revision (the mount recorded everything before the build started);
// when the live file differs from it (size, or modified after the
// revision was recorded and its hash differs: a recording interrupted by
// a crash, a store snapshotted offline) or the file has none, it records
// the live content now as the next revision, so a snapshot never names
// anything but what the file held.
//
// It reads the live file up to the size the build took from its stat,
// never past it (a file still being appended to would give a revision
// longer than its tree entry), streamed as the recorder streams a big
// new file (objstore.Store.PutFrom); a file that shrank meanwhile gives
// a shorter revision, whose size the entry then takes. A file larger
// than a revision may be (maxRecordBytes) is not read: as the recorder
// leaves it unrecorded, the snapshot lists it, with its size and
// metadata, and names no revision (see fs.Revisions).
type liveRevs struct {
	st   *objstore.Store
	ls   *lockedSink
	live string // the live tree's root: store files are named relative to it
	// clean, if set, reports whether every change made to the file
	// through this mount is recorded in a durable revision (the pending
	// journal has no entry for it): see unchanged.
	clean func(fs.FileID) bool
	// successor, if set, is Recorder.Successor: the file whose history
	// a file with none continues (a save that left the path and made a
	// new file there, still open for writing), and where that one lives.
	successor func(path string, id fs.FileID, uid uint32) (fs.FileID, string)
	// read counts the bytes read from live files (to compare or record
	// them); tests check that a snapshot reads what changed, no more.
	read atomic.Int64
}

var _ fs.TreeSource = (*liveRevs)(nil)

// Tree returns a stored tree: a build keeps the unchanged entries of the
// directories it serialises again from their previous trees.
func (r *liveRevs) Tree(ctx context.Context, h index.TreeHash) (*index.Tree, error) {
	return r.st.Tree(h)
}

// Revision implements fs.Revisions. The caller holds r.ls.mu: the
// snapshotter holds it for the whole build (snapshotter.hold).
func (r *liveRevs) Revision(ctx context.Context, id fs.FileID, path string, size int64) (_ index.RevID, _ int64, err error) {
	if size > maxRecordBytes {
		return index.NullRev, size, nil
	}
	s := r.ls.sink
	if s == nil {
		return index.RevID{}, 0, objstore.ErrReadOnly
	}
	if id.IsZero() {
		id = giveID(path)
	}
	fid, known := s.ids[id]
	if id.IsZero() {
		known = false
	}
	if !known && !id.IsZero() {
		// A deleted file a restore is making again, written but not yet
		// reported (restoreDeletedMounted): its content is the next
		// revision of that history, as the recorder would record it
		// (storeSink.stage), not the first of a new store file; record
		// binds it.
		fid = s.adopting[id]
	}
	continued := false
	if !known && fid == 0 && !id.IsZero() && r.successor != nil {
		// The new file of a save still being written: the history of
		// the file that left its path, as its report would continue it.
		var st syscall.Stat_t // its owner; gone meanwhile: it continues nothing
		if syscall.Lstat(path, &st) != nil {
			st.Uid = math.MaxUint32
		}
		if old, livesAt := r.successor(r.rel(path), id, st.Uid); !old.IsZero() && s.ids[old] != 0 {
			fid = s.ids[old]
			if err := s.transfer(id, old, fid); err != nil {
				return index.RevID{}, 0, err
			}
			known, continued = true, true
			delete(r.ls.reserved, id) // stays unused (see reservePending)
			if livesAt != "" {
				// The file that left lives on (vim's f~ with 'backup'
				// set): a history of its own there, as the recorder
				// gives it.
				defer func() {
					if err == nil && s.ids[old] == 0 {
						err = s.forkMoved(ctx, old, livesAt)
					}
				}()
			}
		}
	}
	var prev index.RevID
	if known || fid != 0 {
		prev = s.prev(fid)
	}
	if (prev.IsNull() || !known) && size == 0 {
		// (A restored file still empty, before the restore's write: no
		// empty revision in the history it continues.)
		return index.RevID{}, 0, nil
	}
	var e index.Entry
	if !prev.IsNull() {
		var err error
		if e, err = r.st.Entry(prev); err != nil {
			return index.RevID{}, 0, fmt.Errorf("revision %v: %w", prev, err)
		}
		// (Not for a file that took over another's history just now: its
		// stat says nothing about that file's newest revision, which its
		// content must be compared with, as the redo does.)
		if !continued && !e.Lost() && r.unchanged(path, id, e) {
			return prev, int64(e.Size), nil
		}
	}
	f, err := r.openSame(path, id)
	if err != nil {
		return index.RevID{}, 0, err
	}
	defer f.Close()
	at := time.Now() // the revision's time: see objstore.PutRequest.Time
	src := io.NewSectionReader(countingReader{f, &r.read}, 0, size)
	if !prev.IsNull() && e.Size == uint64(size) {
		if same, err := storeHolds(ctx, r.st, e, src); same || err != nil {
			return prev, int64(e.Size), err
		}
	}
	ne, err := r.record(ctx, id, fid, known, path, prev, src, at)
	return ne.ID(), int64(ne.Size), err
}

// openSame opens the live regular file at path for reading, as the
// build statted it: one removed since gives fs.ErrVanished, as does one
// replaced by a node of another type (a FIFO is not waited on) or by
// another file (it has a FileID, not id), whose content
// must not become a revision of id's history. It follows no symlink on
// the way (fs.OpenReadBeneath): a restore runs this outside a snapshot's
// freeze, and a user who swapped a symlink in for a directory above the
// file had the mount read a file outside the tree into a revision of
// their own (a review).
func (r *liveRevs) openSame(path string, id fs.FileID) (*os.File, error) {
	var f *os.File
	var err error
	if rel := r.rel(path); rel != path {
		f, err = fs.OpenReadBeneath(r.live, rel, syscall.O_NONBLOCK)
	} else {
		f, err = fs.OpenRead(path, syscall.O_NOFOLLOW|syscall.O_NONBLOCK)
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESTALE) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %w", fs.ErrVanished, err)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: %s is now a %v", fs.ErrVanished, path, fi.Mode().Type())
	}
	if err == nil && !id.IsZero() {
		if got := fdID(f); !got.IsZero() && got != id {
			err = fmt.Errorf("%w: %s was replaced by another file", fs.ErrVanished, path)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// unchanged reports whether the live file at path, whose FileID is id,
// still holds revision e's content, from its stat alone: it was last
// changed well before e's content was read (unchangedSince), or it was
// changed a moment before (within ctimeSlack, which does not tell a
// change just before the read from one just after: a snapshot right
// after an in-place write of a big file read and hashed it whole, and
// rebuilt the revision's text, recorded from the written ranges, to
// compare) but no later than e's time, and the mount says that every
// change made to it through the mount is in a durable revision, which e,
// the file's newest, then holds. (A change made behind the mount's back
// within a clock tick of the recording is the one it cannot see: the
// live directory is the mount's.)
func (r *liveRevs) unchanged(path string, id fs.FileID, e index.Entry) bool {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return false
	}
	same := statUnchanged(&st, e) ||
		r.clean != nil && !id.IsZero() && uint64(st.Size) == e.Size && st.Ctim.Nano() <= e.Time && r.clean(id)
	// And it is still id's file: one renamed over it since the build's
	// stat, of the same size, can pass both (a rename's ctime comes from
	// the coarse clock, and may be no later than e's time).
	return same && (id.IsZero() || liveID(path) == id)
}

// storeHolds reports whether revision e of st has src's content,
// streamed through a hash. A revision recorded from written ranges alone
// has no content hash (index.FlagHashDeferred): its text's is compared
// instead, or every snapshot would record such a file again.
func storeHolds(ctx context.Context, st *objstore.Store, e index.Entry, src *io.SectionReader) (bool, error) {
	h := xxhash.New()
	n, err := io.Copy(h, src)
	if err != nil {
		return false, err
	}
	if n != int64(e.Size) || e.Lost() { // it shrank meanwhile, or its data is lost
		return false, nil
	}
	want := e.Hash
	if e.Flags&index.FlagHashDeferred != 0 {
		var ok bool
		if want, ok = textHash(ctx, st, e); !ok {
			return false, nil // recorded again, read back at verify
		}
	}
	return h.Sum64() == want, nil
}

// freeBigText: a text at least this large, rebuilt to hash it, is given
// back to the system once hashed: nothing else allocates enough to make
// the collector run soon after a snapshot, and the mount's memory stayed
// at the size of the largest such text (2 GiB after two snapshots of a
// 1 GiB file).
const freeBigText = 64 << 20

// textHash returns the content hash of revision e of st, rebuilding its
// text (a big one in an unlinked file of the store's directory where the
// store can write it there: the revision of an in-place write, whose
// hash the recorder defers, is a delta on a chunked fulltext); ok is
// false if it cannot be read.
func textHash(ctx context.Context, st *objstore.Store, e index.Entry) (h uint64, ok bool) {
	text, err := readText(ctx, st, e.ID(), e.Size)
	if err != nil {
		return 0, false
	}
	defer text.Close()
	d := xxhash.New()
	if _, err := text.WriteTo(d); err != nil {
		return 0, false
	}
	if text.f == nil && text.size >= freeBigText {
		text.data = nil
		debug.FreeOSMemory()
	}
	return d.Sum64(), true
}

// record stores src as the next revision of the live file, of store
// file fid if known; else it binds the live file to fid if not zero (a
// restored file's, see Revision), or to a new store file named by its
// live-relative path, as the recorder names it. at is when src is read.
func (r *liveRevs) record(ctx context.Context, id fs.FileID, fid index.FileID, known bool, path string, prev index.RevID, src *io.SectionReader, at time.Time) (index.Entry, error) {
	s := r.ls.sink
	if !known {
		if fid == 0 { // (a store file reserved for a restored one stays unused)
			var err error
			if rf, ok := r.ls.reserved[id]; ok { // never a zero id
				fid = rf // made before the build (reservePending)
				delete(r.ls.reserved, id)
			} else if fid, err = r.st.NewFile(r.rel(path)); err != nil {
				return index.Entry{}, err
			}
		}
		if !id.IsZero() {
			if err := s.bind(id, fid); err != nil {
				return index.Entry{}, err
			}
		}
	}
	if !r.ls.deferring { // else commitDeferred fsyncs once, first
		if err := s.syncIDs(); err != nil { // the mapping before the revision
			return index.Entry{}, err
		}
	}
	req := objstore.PutRequest{File: fid, P1: prev, Time: at, Name: r.rel(path)}
	e, commit, err := r.st.PutFrom(ctx, req, src, src.Size(), nil)
	if err == nil && r.ls.deferring {
		r.ls.commits = append(r.ls.commits, commit)
	} else if err == nil {
		err = commit()
	}
	if err != nil {
		return index.Entry{}, fmt.Errorf("record %s for a snapshot: %w", r.rel(path), err)
	}
	s.last[fid] = e.ID()
	delete(s.known, fid) // the next report's ranges start from an older revision
	return e, nil
}

// rel is path relative to the live tree, slash-separated, as the
// recorder names files (fs.Change.Path); path itself if it is not under it.
func (r *liveRevs) rel(path string) string {
	rel, err := filepath.Rel(r.live, path)
	if r.live == "" || err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return path
	}
	return filepath.ToSlash(rel)
}

// ctimeSlack: file times come from the kernel's coarse clock (a tick of
// up to 10 ms behind the precise one that takes a revision's time), so a
// change made just after a revision's content was read may show a ctime
// before that time. A file changed within this much of its revision's
// time is read and hashed instead of trusted.
const ctimeSlack = 20 * time.Millisecond

// unchangedSince reports whether the live file at path still has the
// size of revision e and was last changed well before e's content was
// read (e.Time, see objstore.PutRequest.Time; a writer let go once the
// recorder had read the file, Recorder.WaitRead, may rewrite it before
// the revision is stored). The ctime, not the mtime: utimens sets the
// mtime at will (cp -p, tar), and a write moves the ctime.
func unchangedSince(path string, e index.Entry) bool {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return false
	}
	return statUnchanged(&st, e)
}

// statUnchanged is unchangedSince of a file whose stat is st. (A single
// write(2) still under way when the content was read, begun more than
// ctimeSlack before, took its ctime at its start: a passthrough writer's
// write of tens of MiB racing the recording of an earlier change
// could pass; writes through the server are cut into max_write pieces.)
func statUnchanged(st *syscall.Stat_t, e index.Entry) bool {
	return uint64(st.Size) == e.Size && st.Ctim.Nano() < e.Time-int64(ctimeSlack)
}

// giveID gives a live file that has no FileID (it was not created through
// a mount) a fresh one, as the live tree does at a writable open, so that
// its later revisions continue one history. It returns the zero FileID if
// the live filesystem keeps no user xattrs.
func giveID(path string) fs.FileID {
	id := fs.NewFileID()
	if err := unix.Lsetxattr(path, fs.XattrID, id[:], unix.XATTR_CREATE); err != nil {
		return fs.FileID{}
	}
	return id
}
