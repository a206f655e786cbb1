package mount

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// historian serves "deltafs log", "cat" and "restore" for one store, in a
// mount (through the control socket) and offline. Every call costs what
// the one file has (objstore.History), plus, for log, the file's hold
// rows (objstore.EachHolder).
//
// In a mount it first has the recorder record every change of the file
// closed before the call (Recorder.waitHistory), and a restore writes the old
// content through the mount point, like any writer: the live tree, the
// kernel's caches, the snapshot dirty tracking and the recorder see an
// ordinary rewrite, and the sink records it with the old revision as
// second parent. Offline it writes the live file and records the revision
// itself.
type historian struct {
	st  *objstore.Store
	dir string      // store directory
	rec *Recorder   // in a mount; nil offline
	ls  *lockedSink // nil when read-only
	mnt string      // mount point; "" offline
	// snaps lists the snapshots (cached); nil: read them from the store.
	snaps *snapshotter
	held  sync.Pool // of *[]heldPair: the snapshot column's pairs (history_held.go)
	// waitClosed waits, briefly, for the releases of the writable
	// handles of the live file at rel whose close the mount has seen
	// (fs.FS.WaitFileReleases): close(2) returns before the kernel sends
	// FUSE's release, which is when the change is reported. A file held
	// open for writing is taken as recorded so far, at once. Nil offline.
	waitClosed func(ctx context.Context, rel string)
	// writing reports whether the live inode ino is open for writing in
	// the mount (fs.FS.Writers). Nil offline.
	writing func(ino uint64) bool
}

// resolve maps rel to its live file and store file.
func (h *historian) resolve(ctx context.Context, rel string) (liveFile, index.FileID, error) {
	lf, err := openLiveFile(filepath.Join(h.dir, liveDir), rel)
	if err != nil {
		return lf, 0, err
	}
	if lf.ID.IsZero() {
		return lf, 0, fmt.Errorf("%s: %w", lf.Rel, ErrNoHistory)
	}
	var fid index.FileID
	switch {
	case h.ls != nil && h.rec != nil:
		if h.waitClosed != nil {
			h.waitClosed(ctx, lf.Rel)
		}
		fid, err = storeFileOf(ctx, h.rec, h.ls, lf.ID)
	case h.ls != nil:
		fid, err = storeFileOf(ctx, nil, h.ls, lf.ID)
	default: // read-only: nothing records, live.ids is complete
		var ids map[fs.FileID]index.FileID
		if ids, err = readIDs(h.dir); err == nil {
			var ok bool
			if fid, ok = ids[lf.ID]; !ok {
				err = ErrNoHistory
			}
		}
	}
	if err != nil {
		return lf, 0, fmt.Errorf("%s: %w", lf.Rel, err)
	}
	return lf, fid, nil
}

// Log returns the history of the file t names, oldest first, with the
// snapshots holding each revision.
func (h *historian) Log(ctx context.Context, t Target) (FileLog, error) {
	var revs []RevInfo
	out, err := h.eachLogRev(ctx, t, func(n uint64) { revs = make([]RevInfo, 0, n) },
		func(r objstore.Revision, snaps []heldPair, hs *holders) {
			info := infoOfRev(r)
			info.Snapshots = hs.names(snaps)
			revs = append(revs, info)
		})
	out.Revisions = revs
	return out, err
}

// logRows is Log with the revisions appended to b as rows
// (history_rows.go), as they are read: the control socket's form.
func (h *historian) logRows(ctx context.Context, t Target, b []byte) (FileLog, []byte, error) {
	w := newRowWriter(b)
	out, err := h.eachLogRev(ctx, t, func(n uint64) { w.b = slices.Grow(w.b, 24*int(min(n, 1<<20))) },
		func(r objstore.Revision, snaps []heldPair, hs *holders) { w.addRev(r, snaps, hs.list) })
	return out, w.bytes(), err
}

// eachLogRev resolves t, calls count with how many revisions it has,
// then fn with each and the snapshots holding it (history_held.go); it
// returns the log without revisions.
func (h *historian) eachLogRev(ctx context.Context, t Target, count func(uint64), fn func(objstore.Revision, []heldPair, *holders)) (FileLog, error) {
	found, _, fid, err := h.target(ctx, t)
	if err != nil {
		return FileLog{}, err
	}
	list, err := h.snapshots(ctx)
	if err != nil {
		return FileLog{}, err
	}
	hs, err := loadHolders(ctx, h.st, fid, list, &h.held)
	if err != nil {
		return FileLog{}, wrapCorrupt(err)
	}
	defer hs.release()
	err = h.st.EachRevision(ctx, fid, count, func(r objstore.Revision) error {
		fn(r, hs.next(r.Rev), hs)
		return nil
	})
	if err != nil {
		return FileLog{}, wrapCorrupt(err)
	}
	return FileLog{FileInfo: found}, nil
}

// snapshots returns every snapshot in creation order, read-only: the
// snapshotter's cached list when there is one.
func (h *historian) snapshots(ctx context.Context) ([]index.Snapshot, error) {
	if h.snaps != nil {
		return h.snaps.shared(ctx)
	}
	l, err := h.st.SnapshotList(ctx)
	return l, wrapCorrupt(err)
}

// Cat returns the revision of the file t names that spec picks, and its
// content (a big one in a file: revtext.go).
func (h *historian) Cat(ctx context.Context, t Target, spec RevSpec) (FileRev, Text, error) {
	found, _, fid, err := h.target(ctx, t)
	if err != nil {
		return FileRev{}, nil, err
	}
	out := FileRev{FileInfo: found}
	id, err := h.pick(ctx, string(found.Path), fid, spec)
	if err != nil {
		return out, nil, err
	}
	r, err := h.st.Revision(id)
	if err != nil {
		return out, nil, wrapCorrupt(err)
	}
	text, err := h.text(ctx, id, r.Size)
	if err != nil {
		return out, nil, err
	}
	out.Revision = infoOfRev(r)
	return out, text, nil
}

// pick returns the revision spec names.
func (h *historian) pick(ctx context.Context, rel string, fid index.FileID, spec RevSpec) (index.RevID, error) {
	switch {
	case spec.Snapshot != "":
		id, err := h.st.SnapshotRevision(ctx, fid, string(spec.Snapshot))
		if errors.Is(err, index.ErrNotFound) {
			if _, serr := h.st.Snapshot(string(spec.Snapshot)); serr != nil {
				return id, notFoundf("no snapshot %q", spec.Snapshot)
			}
			return id, notFoundf("%s is not in snapshot %q", rel, spec.Snapshot)
		}
		return id, wrapCorrupt(err)
	case spec.Rev != nil:
		id := index.RevID{File: fid, Rev: index.Rev(*spec.Rev)}
		if _, err := h.st.Revision(id); errors.Is(err, index.ErrNotFound) {
			return id, notFoundf("%s has no revision %d", rel, *spec.Rev)
		} else if err != nil {
			return id, wrapCorrupt(err)
		}
		return id, nil
	}
	e, ok, err := h.st.Latest(fid) // not Revs-1: gc leaves gaps
	if err != nil {
		return index.NullRev, wrapCorrupt(err)
	}
	if !ok {
		return index.NullRev, fmt.Errorf("%s: %w", rel, ErrNoHistory)
	}
	return e.ID(), nil
}

// Restore writes revision rev (nil: the newest) of the file t names back
// into the live file, recorded as a new revision whose second parent is
// rev: in place, or, for a deleted file, as the file made again at t's
// path (see history_deleted.go). A live file needs rev.
func (h *historian) Restore(ctx context.Context, t Target, rev *uint32) (FileRev, error) {
	if h.ls == nil {
		return FileRev{}, fmt.Errorf("restore %s: %w", t.Path, objstore.ErrReadOnly)
	}
	found, lf, fid, err := h.target(ctx, t)
	if err != nil {
		return FileRev{}, err
	}
	if t.File != 0 && t.Path != "" && !found.Deleted {
		// A path with --id is where a deleted file is made again; a
		// live file is restored in place, through any of its names.
		named, err := openLiveFile(filepath.Join(h.dir, liveDir), t.Path)
		if err != nil || named.ID != lf.ID || named.Ino != lf.Ino {
			return FileRev{}, fmt.Errorf("restore %s: file %d lives at %s and is restored there (give that path, or none); deltafs cat --id %d --rev N > FILE copies a revision elsewhere", t.Path, t.File, lf.Rel, t.File)
		}
		lf = named
	}
	out := FileRev{FileInfo: found}
	if rev == nil && !found.Deleted {
		return out, fmt.Errorf("restore %s: %w", lf.Rel, ErrNeedRev)
	}
	old, err := h.pick(ctx, string(found.Path), fid, RevSpec{Rev: rev})
	if err != nil {
		return out, err
	}
	oldRev, err := h.st.Revision(old)
	if err != nil {
		return out, wrapCorrupt(err)
	}
	text, err := h.text(ctx, old, oldRev.Size)
	if err != nil {
		return out, err
	}
	defer text.Close()
	if err := h.roomForRestore(lf, text); err != nil {
		return out, fmt.Errorf("restore %s to revision %d: %w", lf.Rel, old.Rev, err)
	}
	var id index.RevID
	switch {
	case found.Deleted:
		id, err = h.restoreDeleted(ctx, lf, fid, old, text)
	case h.mnt != "":
		id, err = h.restoreMounted(ctx, lf, fid, old, text)
	default:
		id, err = h.restoreOffline(ctx, lf, fid, old, text)
	}
	if err != nil {
		return out, fmt.Errorf("restore %s to revision %d: %w", lf.Rel, old.Rev, err)
	}
	out.Path = ByteString(lf.Rel)
	r, err := h.st.Revision(id)
	out.Revision = infoOfRev(r)
	return out, wrapCorrupt(err)
}

// restoreMounted writes text through the mount point and waits for the
// recorder, which records it with old as second parent.
func (h *historian) restoreMounted(ctx context.Context, lf liveFile, fid index.FileID, old index.RevID, text *revText) (index.RevID, error) {
	if err := h.keepOpenWrites(ctx, lf); err != nil {
		return index.NullRev, err
	}
	h.ls.mu.Lock()
	before := h.ls.sink.prev(fid)
	h.ls.sink.restoring[fid] = restoreOf(old, text)
	h.ls.mu.Unlock()
	werr := partly(rewrite(func() (*os.File, error) { return openSameBeneath(h.mnt, lf.Rel, lf.Ino) }, text, text.Size(), true), lf, before)
	ferr := h.rec.Flush(ctx, lf.ID)
	h.ls.mu.Lock()
	delete(h.ls.sink.restoring, fid)
	now := h.ls.sink.prev(fid)
	h.ls.mu.Unlock()
	if err := errors.Join(werr, ferr); err != nil {
		return index.NullRev, err
	}
	if now == before {
		return index.NullRev, errors.New("the mount recorded no new revision (see its log)")
	}
	return now, nil
}

// keepOpenWrites records, as a revision of its own, what a writer still
// holding the file open has written and not yet closed or fsynced: the
// restore truncates the file under it, and its content would be in no
// revision. It is read as a snapshot reads a file open for writing
// (liveRevs.Revision: as it is now, up to its size now; nothing is
// recorded when it still holds its newest revision).
func (h *historian) keepOpenWrites(ctx context.Context, lf liveFile) error {
	if h.writing == nil || !h.writing(lf.Ino) {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(lf.Path, &st); err != nil {
		return err
	}
	lr := &liveRevs{st: h.st, ls: h.ls, live: filepath.Join(h.dir, liveDir)}
	h.ls.mu.Lock() // as a snapshot holds it (liveRevs.Revision)
	_, _, err := lr.Revision(ctx, lf.ID, lf.Path, st.Size)
	h.ls.mu.Unlock()
	if err != nil {
		return fmt.Errorf("record what an open writer wrote first: %w", err)
	}
	return nil
}

// restoreOffline writes the live file and records the revision itself,
// after recording what the live file holds if that is not its newest
// revision (keepLiveChange).
func (h *historian) restoreOffline(ctx context.Context, lf liveFile, fid index.FileID, old index.RevID, text *revText) (index.RevID, error) {
	h.ls.mu.Lock()
	defer h.ls.mu.Unlock()
	s := h.ls.sink
	if err := h.keepLiveChange(ctx, lf, fid); err != nil {
		return index.NullRev, fmt.Errorf("record the live file's unrecorded change first: %w", err)
	}
	prev := s.prev(fid)
	if err := rewrite(h.openLiveFile(lf), text, text.Size(), false); err != nil {
		return index.NullRev, partly(err, lf, prev)
	}
	e, err := h.putText(ctx, objstore.PutRequest{File: fid, P1: prev, P2: old, Hints: []index.RevID{old}, Name: lf.Rel}, text)
	if err != nil {
		// The live file holds a content no revision has: put back the
		// one it had, which the next mount would not see changed.
		if rerr := h.putBack(context.WithoutCancel(ctx), lf, prev); rerr != nil {
			return index.NullRev, fmt.Errorf("%w; and the live file, which now holds the restored content unrecorded, could not be put back: %v", err, rerr)
		}
		return index.NullRev, err
	}
	s.last[fid] = e.ID()
	delete(s.known, fid) // a later report's ranges start from an older revision
	return e.ID(), nil
}

// roomForRestore refuses a restore of text over lf that would leave the
// store's file system without the room to record it (the store's
// reserve for a put): one that ran out midway left the live file half
// overwritten (a user review). The text's length is checked first; only
// if that does not fit are its blocks of data counted (a read of it):
// writeSparse leaves the rest as holes (a disk image).
func (h *historian) roomForRestore(lf liveFile, text *revText) error {
	var held int64 // the blocks the rewrite frees
	var st unix.Stat_t
	if err := unix.Lstat(lf.Path, &st); err == nil {
		held = st.Blocks * 512
	}
	err := index.RoomAfter("restore", h.dir, text.Size()-held)
	if !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	if data, derr := dataBytes(text, text.Size()); derr == nil && data < text.Size() {
		return index.RoomAfter("restore", h.dir, data-held)
	}
	return err
}

// dataBytes returns how many bytes of the first size of src are in
// blocks writeSparse writes (not all zeros), a whole block each.
func dataBytes(src io.ReaderAt, size int64) (int64, error) {
	var zero [sparseBlock]byte
	buf := make([]byte, min(size, sparseBuf))
	var n int64
	for base := int64(0); base < size; base += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-base)]
		if k, err := src.ReadAt(b, base); k < len(b) {
			return 0, cmp.Or(err, io.ErrUnexpectedEOF)
		}
		for off := 0; off < len(b); off += sparseBlock {
			end := min(off+sparseBlock, len(b))
			if !bytes.Equal(b[off:end], zero[:end-off]) {
				n += sparseBlock
			}
		}
	}
	return n, nil
}

// partly adds to err, a rewrite's failure, that the live file lf was
// left partly overwritten, and which revision held what it had.
func partly(err error, lf liveFile, prev index.RevID) error {
	var u untouched
	if err == nil || prev.IsNull() || errors.As(err, &u) {
		return err
	}
	return fmt.Errorf("%w (%s is left partly overwritten: its content before was revision %d)", err, lf.Rel, prev.Rev)
}

// untouched is a rewrite's error that came before it changed the file
// (its open failed: the mount point gone at an unmount, say).
type untouched struct{ err error }

func (u untouched) Error() string { return u.err.Error() }
func (u untouched) Unwrap() error { return u.err }

// putBack writes revision prev back into the live file lf of an
// unmounted store, after a restore's write that could not be recorded.
func (h *historian) putBack(ctx context.Context, lf liveFile, prev index.RevID) error {
	if prev.IsNull() {
		return errors.New("no revision to put back")
	}
	r, err := h.st.Revision(prev)
	if err != nil {
		return err
	}
	text, err := h.text(ctx, prev, r.Size)
	if err != nil {
		return err
	}
	defer text.Close()
	return rewrite(h.openLiveFile(lf), text, text.Size(), false)
}

// keepLiveChange records the content of the live file of an unmounted
// store as file fid's next revision when it differs from its newest: a
// change a killed mount left for the next one to record (see unclean.go),
// which the restore would otherwise write over. With h.ls.mu held.
func (h *historian) keepLiveChange(ctx context.Context, lf liveFile, fid index.FileID) error {
	s := h.ls.sink
	prev := s.prev(fid)
	if prev.IsNull() {
		return nil
	}
	e, err := h.st.Entry(prev)
	if err != nil {
		return err
	}
	f, err := fs.OpenRead(lf.Path, unix.O_NOFOLLOW)
	if err != nil {
		return err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if uint64(st.Size) == e.Size {
		if same, err := storeHolds(ctx, h.st, e, io.NewSectionReader(f, 0, st.Size)); err != nil || same {
			return err
		}
	}
	if st.Size > maxRecordBytes {
		return fmt.Errorf("%d bytes, more than the %d a revision may have", st.Size, int64(maxRecordBytes))
	}
	cur, err := objstore.ReadAll(f, st.Size)
	if err != nil {
		return err
	}
	ne, err := h.st.Put(ctx, objstore.PutRequest{File: fid, Data: cur, P1: prev, Name: lf.Rel, Time: time.Unix(st.Mtim.Unix())})
	if err != nil {
		return err
	}
	s.last[fid] = ne.ID()
	delete(s.known, fid)
	return nil
}

// rewrite replaces the content of the existing file p with the size
// bytes of text, in place (same inode, so its FileID and hard links
// stay), leaving holes for its blocks of zeros (writeSparse). With fsync
// set it fsyncs before closing: in a mount, fsync reports the change to
// the recorder before it returns, where close(2) returns before the
// kernel's release.
func rewrite(open func() (*os.File, error), text io.ReaderAt, size int64, fsync bool) error {
	f, err := open()
	if err != nil {
		return untouched{err}
	}
	werr := writeSparse(f, text, size)
	if werr == nil && fsync {
		werr = f.Sync()
	}
	return errors.Join(werr, f.Close())
}

// openLiveFile opens lf's live file in the store's live tree for an
// offline restore's rewrite (openSameBeneath: no symlink a user of the
// mount left in the tree is followed).
func (h *historian) openLiveFile(lf liveFile) func() (*os.File, error) {
	return func() (*os.File, error) { return openSameBeneath(filepath.Join(h.dir, liveDir), lf.Rel, lf.Ino) }
}

// sparseBlock is the unit writeSparse leaves a hole for: a file system
// block; sparseBuf, a multiple of it, is what it reads at a time.
const (
	sparseBlock = 4096
	sparseBuf   = 1 << 20
)

// writeSparse writes the size bytes of src into the empty file f,
// sparseBuf at a time, leaving a hole for every block of zeros: a
// restored revision of a sparse file (a disk image, a database) took
// its full size on disk.
func writeSparse(f *os.File, src io.ReaderAt, size int64) error {
	var zero [sparseBlock]byte
	buf := make([]byte, min(size, sparseBuf))
	for base := int64(0); base < size; base += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-base)]
		if n, err := src.ReadAt(b, base); n < len(b) {
			return fmt.Errorf("read the revision at %d: %w", base+int64(n), cmp.Or(err, io.ErrUnexpectedEOF))
		}
		start := -1 // the start of the run of blocks to write, if any
		for off := 0; ; off += sparseBlock {
			end := min(off+sparseBlock, len(b))
			if off < len(b) && !bytes.Equal(b[off:end], zero[:end-off]) {
				if start < 0 {
					start = off
				}
				continue
			}
			if start >= 0 {
				if _, err := f.WriteAt(b[start:min(off, len(b))], base+int64(start)); err != nil {
					return err
				}
				start = -1
			}
			if off >= len(b) {
				break
			}
		}
	}
	return f.Truncate(size)
}

// putText records text, the text of revision req.P2 that a restore
// wrote back, as the revision req describes, and waits for it to be
// durable: a dedup of req.P2, read no more (objstore.Store.PutSameNoWait),
// or, where the store cannot make one, put from text (PutFrom: a revision
// of the store with the same text is compared with it block by block, not
// held whole).
func (h *historian) putText(ctx context.Context, req objstore.PutRequest, text *revText) (index.Entry, error) {
	e, commit, err := h.st.PutSameNoWait(ctx, req, req.P2, text.gen, text, text.Size(), nil)
	if err != nil {
		return e, err
	}
	return e, commit()
}
