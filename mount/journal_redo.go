package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
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

// redo is the redo of one file the journal found pending at mount.
type redo struct {
	id  fs.FileID
	gen uint64 // the journal's gen of id when the redo was queued
	// path, if set, is where the file was when the redo was queued (a
	// rename took it out of the excluded paths: exclude.go; the check
	// after a mount that did not end cleanly: unclean.go).
	path string
	// checked: queued by that check, not from the journal, which it
	// leaves alone.
	checked bool
}

// redoer redoes, at mount, the recordings a killed mount left undone:
// each file pending in the journal is compared with its newest revision
// (size, then content hash) and recorded from the live file when they
// differ. It runs as events of the Recorder, in its goroutine, so that
// the mount serves at once while Sync (fsync, snapshots, unmount) waits
// for the redo.
type redoer struct {
	st   *objstore.Store
	ls   *lockedSink
	j    *journal
	live string
	log  *slog.Logger
	x    *excluder // pending files it excludes stay pending
	// restarted: the previous mount did not end cleanly and the machine
	// restarted since; a stat may say a file is unchanged when its
	// data is not (mountedFile), so every redo compares the content.
	restarted bool
	failed    atomic.Int32 // redos that failed, kept pending (trustBoot)
	skipped   atomic.Bool  // the check could not read a directory (trustBoot)

	mu     sync.Mutex           // guards todo and walked: queue runs again after a full disk (space.go)
	todo   map[fs.FileID]bool   // pending ids not redone yet
	walked map[fs.FileID]string // where the walk of the live tree found them
}

// queue queues the redo of every pending file and returns how many: at
// mount, and again when recording resumes after a full disk.
func (r *redoer) queue(rec *Recorder) int {
	entries := r.j.entries()
	r.mu.Lock()
	if r.todo == nil {
		r.todo = make(map[fs.FileID]bool, len(entries))
	}
	for id := range entries {
		r.todo[id] = true
	}
	r.walked = nil // files moved since the last walk
	r.mu.Unlock()
	for id, p := range entries {
		rec.queueRedo(&redo{id: id, gen: p.gen})
	}
	return len(entries)
}

// run redoes one file; a file no longer in the live tree is dropped.
func (r *redoer) run(ctx context.Context, rd *redo) error {
	defer func() {
		r.mu.Lock()
		delete(r.todo, rd.id)
		r.mu.Unlock()
	}()
	rel, ok := rd.path, rd.path != "" && liveID(filepath.Join(r.live, rd.path)) == rd.id
	if !ok {
		rel, ok = r.locate(rd.id)
	}
	err := errMoved
	for try := 0; ok && errors.Is(err, errMoved) && try < 2; try++ {
		if try > 0 {
			// The mount serves: a rename between the lookup and the
			// open put another file at rel. Walk again, once.
			r.mu.Lock()
			r.walked = nil
			r.mu.Unlock()
			if rel, ok = r.locate(rd.id); !ok {
				break
			}
		}
		if r.x.excluded(rel) {
			r.log.Debug("pending file excluded from history; left pending", "path", rel)
			return nil
		}
		err = r.redoFile(ctx, rd.id, rel, !r.restarted)
	}
	if !ok {
		r.log.Debug("pending file no longer in the live tree; dropped", "id", rd.id)
	} else if err != nil { // errMoved again (moved twice under us) or another error: kept pending
		r.failed.Add(1)
		if rd.checked {
			// Into the journal: redone again after a full disk, and at
			// the next mount; the store stays marked (unclean.go).
			r.j.keep(rd.id, rel)
		}
		return fmt.Errorf("redo %s: %w", rel, err)
	}
	if !rd.checked {
		r.j.redone(rd.id, rd.gen)
	}
	return nil
}

// locate finds the live file of id: at its path hint, else by one walk
// of the live tree for every id not redone yet (the hint is stale after
// a directory rename, or a rename the journal missed).
func (r *redoer) locate(id fs.FileID) (string, bool) {
	if hint := r.j.hint(id); hint != "" && liveID(filepath.Join(r.live, hint)) == id {
		return hint, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.walked == nil {
		r.walk()
	}
	rel, ok := r.walked[id]
	return rel, ok
}

func (r *redoer) walk() {
	r.walked = map[fs.FileID]string{}
	_ = filepath.WalkDir(r.live, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // an unreadable directory is skipped, not fatal
		}
		if id := liveID(p); r.todo[id] {
			if rel, err := filepath.Rel(r.live, p); err == nil {
				r.walked[id] = rel
			}
		}
		return nil
	})
}

// errMoved: the live file opened for a redo is not the pending file.
var errMoved = errors.New("another file is at the pending file's path")

// fdID returns the FileID on the open file f, or the zero FileID.
func fdID(f *os.File) fs.FileID {
	var id fs.FileID
	if n, err := unix.Fgetxattr(int(f.Fd()), fs.XattrID, id[:]); err != nil || n != len(id) {
		return fs.FileID{}
	}
	return id
}

// liveID returns the FileID on the live file at p, or the zero FileID.
func liveID(p string) fs.FileID {
	var id fs.FileID
	if n, err := unix.Lgetxattr(p, fs.XattrID, id[:]); err != nil || n != len(id) {
		return fs.FileID{}
	}
	return id
}

// redoFile records the live file of id at rel unless its newest revision
// holds its content already; with trustStat, a stat that says the file
// has not changed since that revision is taken at its word.
func (r *redoer) redoFile(ctx context.Context, id fs.FileID, rel string, trustStat bool) error {
	f, err := fs.OpenRead(filepath.Join(r.live, rel), unix.O_NOFOLLOW)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return errMoved // moved or replaced since it was looked up
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fdID(f) != id {
		return errMoved // renamed since it was looked up: not id's content
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	if fi.Size() > maxRecordBytes {
		r.log.Warn("pending file too large to record; left unrecorded", "path", rel, "size", fi.Size())
		return nil
	}
	r.ls.mu.Lock()
	defer r.ls.mu.Unlock()
	s := r.ls.sink
	fid, known := s.ids[id]
	if cont := r.j.continues(id); !known && !cont.IsZero() {
		// An atomic save that died before its rename was recorded, or
		// the new file of a save that left its path (vacated.go): continue
		// the history of the file it replaced, as the sink would have.
		if fid, known = s.ids[cont]; known {
			if err := s.transfer(id, cont, fid); err != nil {
				return err
			}
		}
	}
	var prev index.RevID
	if known {
		prev = s.prev(fid)
	}
	if trustStat && r.j.continues(id).IsZero() && r.unchangedSince(prev, fi) {
		return nil
	}
	at := time.Now() // the revision's time: see objstore.PutRequest.Time
	data, err := objstore.ReadAll(f, fi.Size())
	if err != nil {
		return err
	}
	if same, err := r.holds(ctx, prev, data); same || err != nil {
		return err
	}
	if !known {
		if len(data) == 0 {
			return nil // an empty file with no history: nothing lost
		}
		if fid, err = r.st.NewFile(rel); err != nil {
			return err
		}
		if err := s.bind(id, fid); err != nil {
			return err
		}
	}
	if err := s.syncIDs(); err != nil { // the mapping before the revision
		return err
	}
	e, err := r.st.Put(ctx, objstore.PutRequest{File: fid, Data: data, P1: prev, Time: at, Name: rel})
	if err != nil {
		return err
	}
	s.last[fid] = e.ID()
	delete(s.known, fid) // the next report's ranges start from an older state
	r.log.Info("recorded a change a previous mount left unrecorded", "path", rel, "rev", e.ID())
	return nil
}

// unchangedSince reports, without reading the file, that it has not
// changed since revision prev was recorded: same size, and its ctime
// well before the revision's time (when its content was read, see
// statUnchanged). Unlike the mtime, which utimens sets at will (tar,
// cp -p), the ctime moves with every write and cannot be set back. A file dirtied but never written (a passthrough writer
// that wrote nothing) or recorded just before the kill is skipped so.
// Not for a file that replaced another (an atomic save): prev may then
// be the replaced file's content, recorded after the save's rename.
func (r *redoer) unchangedSince(prev index.RevID, fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if prev.IsNull() || !ok {
		return false
	}
	e, err := r.st.Entry(prev)
	return err == nil && statUnchanged(st, e)
}

// holds reports whether revision prev has exactly data: the sizes first,
// then the content hash in the index (or the text itself, for a
// revision stored from its written ranges, whose hash is deferred).
func (r *redoer) holds(ctx context.Context, prev index.RevID, data []byte) (bool, error) {
	if prev.IsNull() {
		return false, nil
	}
	e, err := r.st.Entry(prev)
	if err != nil {
		return false, fmt.Errorf("revision %v: %w", prev, err)
	}
	if e.Size != uint64(len(data)) || e.Lost() {
		return false, nil
	}
	if e.Flags&index.FlagHashDeferred == 0 {
		return e.Hash == xxhash.Sum64(data), nil
	}
	text, err := r.st.Get(ctx, prev)
	return err == nil && bytes.Equal(text, data), err
}
