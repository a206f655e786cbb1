package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// maxRecordBytes caps the files recorded: the store takes a revision as
// one fulltext in memory, so a larger file (a VM image, a sparse file of
// many GiB) stays in the live tree, unrecorded, with one log line.
const maxRecordBytes = 4 << 30

// storeSink records changes as revisions in an objstore.Store.
type storeSink struct {
	st  *objstore.Store
	log *slog.Logger
	// ids maps live identities to store ones. The sink's goroutine (or
	// a snapshot, holding lockedSink's lock) reads it freely and writes
	// it with idsMu held; anyone else reads it with idsMu read-locked
	// (storeID), so that .history never waits for a recording.
	idsMu sync.RWMutex
	ids   map[fs.FileID]index.FileID
	last  map[index.FileID]index.RevID // newest revision of each file
	// known holds the size of a file's newest revision when that
	// revision was recorded from a report of this mount, so that the
	// next report's ranges describe the change from it exactly.
	known map[index.FileID]int64
	// restoring holds the revision a file's next change restores (a
	// restore writing through the mount): the second parent of the
	// revision that records it.
	restoring map[index.FileID]restore
	// adopting maps the live identity of a file a restore makes where a
	// deleted file was to that file's store file: its first change
	// continues that history (history_deleted.go).
	adopting map[fs.FileID]index.FileID
	// forked holds, for a live identity whose history another file took
	// over (transfer) while its inode may live on (a hard link, an open
	// descriptor), the revision it had then: the second parent of its
	// first revision in a store file of its own. Capped (forkedOrder):
	// a forgotten one only costs that revision a fulltext.
	forked      map[fs.FileID]index.RevID
	forkedOrder []fs.FileID
	saveWindow  time.Duration // see storesink_rename.go
	idSyncs     int           // fsyncs of the ids file (tests count them)
	live        string        // the live tree (STORE/live), see forkMoved
	f           idsLog        // idsFile, for appending
	// unwritten holds the records bound since the last syncIDs, which
	// writes them with one write(2) before its fsync: a window of new
	// files cost a write per file (10,000 for an untar).
	unwritten []byte
	// idsErr, once set, is the failed write or fsync of the ids file:
	// what of it reached the disk is unknown, so the sink records nothing
	// more (every put needs its mapping durable first); the journal
	// keeps those files for the next mount's redo.
	idsErr error
	// liveRead counts the bytes read from live files to record them:
	// what recording costs (tests and benchmarks read it).
	liveRead atomic.Int64
	// waited reports whether anyone waits for the recording (the
	// Recorder's Waiting); nil: nobody says, taken as yes. See yields.
	waited func() bool
}

// idsLog is what the sink needs of its ids file (tests watch its calls).
type idsLog interface {
	io.Writer
	Sync() error
	Close() error
}

// openStoreSink loads the id map of the store in dir.
func openStoreSink(st *objstore.Store, path string, log *slog.Logger) (*storeSink, error) {
	s := &storeSink{st: st, log: log, ids: map[fs.FileID]index.FileID{}, last: map[index.FileID]index.RevID{}, known: map[index.FileID]int64{}, restoring: map[index.FileID]restore{}, adopting: map[fs.FileID]index.FileID{}, forked: map[fs.FileID]index.RevID{}, saveWindow: saveWindow,
		live: filepath.Join(filepath.Dir(path), liveDir)}
	if err := checkIDsKept(filepath.Dir(path)); err != nil {
		return nil, err
	}
	f, err := openIDs(st, path, s.ids, log)
	if err != nil {
		return nil, err
	}
	s.f = f
	return s, nil
}

// storeID returns the store identity of the live file id, if it has one.
func (s *storeSink) storeID(id fs.FileID) (index.FileID, bool) {
	s.idsMu.RLock()
	defer s.idsMu.RUnlock()
	fid, ok := s.ids[id]
	return fid, ok && !id.IsZero()
}

// Close closes the id map, writing (not syncing) what is bound.
func (s *storeSink) Close() error { return errors.Join(s.writeIDs(), s.f.Close()) }

// Record implements Sink.
func (s *storeSink) Record(ctx context.Context, ev Event) error {
	switch {
	case ev.Change != nil:
		defer ev.Change.Close()
		return s.change(ctx, ev.Change, ev.Continues, ev.LivesAt, ev.read)
	case ev.Rename != nil && binds(ev.Rename):
		return s.renamedOver(ctx, ev.Rename)
	case ev.Remove != nil && namesDeleted(ev):
		return s.removed(ev.Remove)
	}
	return nil
}

// namesDeleted reports whether removal ev may name a deleted file: the
// unlink of a regular file with a live identity and no link left, as
// far as fs says (it gathers no link count for the Recorder,
// fs.UnlinkListener, so a file may live on through another link: its
// own removal names it again, and so does its next change's revision),
// that may have moved since its last revision (Event.Moved: else its
// record is named by the path it left already).
func namesDeleted(ev Event) bool {
	r := ev.Remove
	return ev.Moved && !r.Dir && !r.ID.IsZero() && r.Nlink == 0
}

// removed names the store file of the unlinked live file r.ID, if it has
// one, by the path it left (objstore.Store.SetName: written with the next
// group commit, if it moved since its last revision), where "deltafs log
// --deleted" lists it (history_deleted.go).
func (s *storeSink) removed(r *fs.Remove) error {
	fid := s.ids[r.ID]
	if fid == 0 {
		return nil
	}
	if err := s.st.SetName(fid, r.Path); err != nil {
		return fmt.Errorf("%s: name the removed file's history: %w", r.Path, err)
	}
	return nil
}

// Ignores implements IgnoringSink: Record does nothing for links,
// removals that name no deleted file (see namesDeleted) and renames that bind
// no identity. Nothing in the store follows names but a deleted file's
// last path: a removed file's revisions stay until gc, and a change
// still pending when its file is removed reads the file through
// fs.Change. (The zero Remove, which Recorder.IgnoresRemovesAndLinks
// asks about, is ignored: fs gathers nothing for removals but the
// unlinks it reports anyway, fs.UnlinkListener.)
func (s *storeSink) Ignores(ev Event) bool {
	return ev.Change == nil && ev.redo == nil && (ev.Remove != nil && !namesDeleted(ev) || ev.Link != nil || ev.Rename != nil && !binds(ev.Rename))
}

// binds reports whether a rename may give the renamed file the replaced
// file's history (a rename over another file, not an exchange).
func binds(r *fs.Rename) bool {
	return !r.Replaced.IsZero() && !r.ID.IsZero() && !r.Exchange
}

// change stores the live content of c as the next revision of its file:
// from the written ranges alone when they describe the change from the
// previous revision, else from the whole live file. When c continues the
// history of file continues, which left its path for livesAt (see
// Event), that file keeps a history of its own if it lives there still.
func (s *storeSink) change(ctx context.Context, c *fs.Change, continues fs.FileID, livesAt string, read *readSignal) error {
	defer read.readDone()
	j, err := s.stage(c, continues)
	if err != nil {
		return err
	}
	j.read = read
	s.open(j)
	s.newFiles([]*job{j})
	s.bindNew([]*job{j})
	s.put(ctx, j)
	j.durable()
	err = s.finish(j)
	if livesAt != "" && s.ids[continues] == 0 {
		err = errors.Join(err, s.forkMoved(ctx, continues, livesAt))
	}
	return err
}

// job is the recording of one change: stage fills in what it needs from
// the sink's maps (sequentially, in event order), open reopens the live
// file, newFiles makes the store identities of new files (one index
// transaction for all the jobs), bindNew maps them durably (one fsync
// for all the jobs), put reads and puts (several jobs of distinct files
// may open and put at once, see recordWindow), durable waits for the
// put's group commit, finish updates the maps.
type job struct {
	c        *fs.Change
	fid      index.FileID // 0: a new store file, made by newFiles
	p1       index.RevID
	baseLen  int64 // size of p1 when this mount recorded it (known)
	haveBase bool
	p2       index.RevID
	hints    []index.RevID

	entry index.Entry // results of run
	size  int64
	err   error
	gone  bool // the live file was removed before it could be opened

	restoring bool        // the change restores revision p2: a fulltext put
	restored  *revText    // p2's text, which the restore wrote (nil if not known)
	live      *os.File    // the live file, reopened by open
	read      *readSignal // signalled once put no longer reads the live file
	// commit makes the put durable (objstore.PutNoWait,
	// PutDeltaNoWait), nil once it is: see durable.
	commit func() error
}

// durable waits until j's revision is durable. A window's puts are all
// appended before the first of them waits, so that one group commit
// holds them all (each waiting right after its own append, measured: 201
// puts in 60-80 commits).
func (j *job) durable() {
	if j.commit == nil {
		return
	}
	if err := j.commit(); err != nil && j.err == nil {
		j.err = fmt.Errorf("%s: record revision: %w", j.c.Path, err)
	}
	j.commit = nil
}

// stage prepares the recording of c; a change that continues another
// file's history is bound to that file's store identity now.
func (s *storeSink) stage(c *fs.Change, continues fs.FileID) (*job, error) {
	if c.Size > maxRecordBytes {
		// Bytes changed unrecorded: the next report's written ranges
		// must not be taken against the last revision, which lacks them.
		if fid := s.ids[c.ID]; fid != 0 {
			delete(s.known, fid)
		}
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a revision may have; change not recorded: %w", c.Path, c.Size, int64(maxRecordBytes), errTooLarge)
	}
	j := &job{c: c}
	switch {
	// A deleted file a restore makes again (before a file that left its
	// path lately, whose history the new file would otherwise continue);
	// bound by bindNew.
	case !c.ID.IsZero() && s.ids[c.ID] == 0 && s.adopting[c.ID] != 0:
		j.fid = s.adopting[c.ID]
	// (A file with a history of its own keeps it: a rename over another
	// file hands that history on in renamedOver.)
	case !continues.IsZero() && s.ids[continues] != 0 && s.ids[c.ID] == 0:
		j.fid = s.ids[continues]
		if err := s.transfer(c.ID, continues, j.fid); err != nil {
			return nil, err
		}
	case !c.ID.IsZero() && s.ids[c.ID] != 0:
		j.fid = s.ids[c.ID]
	}
	if j.fid != 0 { // else a new store file, made by run: no previous revision
		j.p1 = s.prev(j.fid)
		j.baseLen, j.haveBase = s.known[j.fid]
		if c.Data != nil {
			// read at the report, perhaps before p1 was (the original's
			// last change, recorded after its temp file's report)
			c.DataTime = s.notBefore(j.p1, c.DataTime)
		}
	} else if from, ok := s.forked[c.ID]; ok && !from.IsNull() {
		// An inode whose history another file took over, changed since:
		// a store file of its own, continuing from what it was. One
		// with no name left (a descriptor keeps it) is named by the
		// path it had, its history's.
		j.p2, j.hints = from, []index.RevID{from}
		if c.Path == "" {
			if m, err := s.st.File(from.File); err == nil {
				c.Path = m.Name
			}
		}
	}
	for _, src := range c.Sources {
		if sf, ok := s.ids[src.ID]; ok && sf != j.fid {
			j.hints = append(j.hints, s.prev(sf))
			if j.p2.IsNull() {
				j.p2 = s.prev(sf)
			}
		}
	}
	// A restore is a fulltext put, so that the store may dedup or delta
	// it against the revision it brings back: a dedup of it, read no
	// more, when the live file holds what the restore wrote (put).
	if r, ok := s.restoring[j.fid]; ok && j.fid != 0 {
		delete(s.restoring, j.fid)
		j.restoring, j.p2, j.hints, j.restored = true, r.rev, []index.RevID{r.rev}, r.text
	}
	return j, nil
}

// open reopens j's live file; it touches none of the sink's maps.
func (s *storeSink) open(j *job) {
	c := j.c
	if c.Data != nil {
		return // read at the report
	}
	live, err := c.Open()
	if errors.Is(err, syscall.ESTALE) {
		// Removed before its turn, while too many changes were pending
		// for each to hold its file open (see fs.Change.Open).
		s.log.Warn("live file removed before it was recorded: its last change is lost", "path", c.Path)
		j.gone = true
		return
	}
	if err != nil {
		j.err = fmt.Errorf("%s: live file not reopened; change not recorded: %w", c.Path, err)
		return
	}
	j.live = live
}

// newFiles makes the store files of the opened jobs of new files, in one
// index transaction.
func (s *storeSink) newFiles(jobs []*job) {
	var fresh []*job
	var names []string
	for _, j := range jobs {
		if j != nil && j.err == nil && !j.gone && j.fid == 0 {
			fresh, names = append(fresh, j), append(names, j.c.Path)
		}
	}
	if len(fresh) == 0 {
		return
	}
	fids, err := s.st.NewFiles(names)
	for i, j := range fresh {
		if err != nil {
			j.err = fmt.Errorf("%s: new store file: %w", j.c.Path, err)
			continue
		}
		j.fid = fids[i]
	}
}

// bindNew maps the live identities of jobs to their (new) store files
// and makes every appended record durable, before any of their puts:
// one fsync for the whole window. A job whose mapping is not durable is
// not put.
func (s *storeSink) bindNew(jobs []*job) {
	var err error
	for _, j := range jobs {
		if j != nil && j.err == nil && !j.gone && !j.c.ID.IsZero() && s.ids[j.c.ID] != j.fid {
			err = errors.Join(err, s.bind(j.c.ID, j.fid))
		}
	}
	if err = errors.Join(err, s.syncIDs()); err == nil {
		return
	}
	for _, j := range jobs {
		if j != nil && j.err == nil && !j.gone {
			j.err = fmt.Errorf("%s: change not recorded: %w", j.c.Path, err)
		}
	}
}

// put records j's change, durable once j.durable returns; it touches
// none of the sink's maps.
func (s *storeSink) put(ctx context.Context, j *job) {
	c, live := j.c, j.live
	if j.err != nil || j.gone {
		return
	}
	if !j.restoring && s.fromWrites(ctx, j, live) {
		return
	}
	at := time.Now() // the revision's time: see objstore.PutRequest.Time
	// A rewrite that changed no byte is no revision (SkipSame), but a
	// restore is one, as the user asked, whatever it brings back.
	req := objstore.PutRequest{File: j.fid, P1: j.p1, P2: j.p2, Hints: j.hints, Time: at, Name: c.Path, SkipSame: !j.restoring}
	if c.Data != nil {
		// Read at the report (fs.Change.Data).
		req.Time, req.Data = c.DataTime, c.Data
		j.read.readDone()
		s.liveRead.Add(int64(len(c.Data)))
		j.entry, j.commit, j.err = s.st.PutNoWait(ctx, req)
	} else {
		size := c.Size
		if fi, err := live.Stat(); err == nil {
			size = fi.Size()
		}
		// The store signals once it no longer reads the live file (the
		// text is in memory, or a streamed big fulltext is read to its
		// end): a writer may change the live file while it is put, and
		// its changes then have ctimes after at (see ctimeSlack), not
		// before the revision's time. (A change recorded from its ranges
		// signals only once it is stored, in finish: if the store refuses
		// the delta, the whole live file is read after all.)
		src := countingReader{live, &s.liveRead}
		if j.restored != nil && sameText(src, j.restored, size) {
			// The live file holds what the restore wrote: a dedup of
			// the revision it brought back.
			j.entry, j.commit, j.err = s.st.PutSameNoWait(ctx, req, j.p2, j.restored.gen, src, size, j.read.readDone)
		} else {
			j.entry, j.commit, j.err = s.st.PutFrom(ctx, req, src, size, j.read.readDone)
		}
	}
	if j.err != nil {
		j.err = fmt.Errorf("%s: record revision: %w", c.Path, j.err)
	}
	j.size = int64(j.entry.Size)
}

// finish takes j's results into the sink's maps.
func (s *storeSink) finish(j *job) error {
	j.read.readDone()
	if j.err != nil || j.gone {
		return j.err
	}
	s.last[j.fid] = j.entry.ID()
	s.known[j.fid] = j.size
	return nil
}

// fromWrites records j's change from its written ranges alone (a
// delta-only put: reading, hashing and storing only the bytes written),
// when the previous revision is exactly the content the ranges start
// from. It reports whether it recorded the change; false means "record
// the whole file": the store wants a fulltext (ErrNeedFulltext: its chain
// cap, at most once per MaxChainLen revisions, or a delta no smaller than
// the text), or the live file changed under the report (a later report
// describes that change).
func (s *storeSink) fromWrites(ctx context.Context, j *job, live io.ReaderAt) bool {
	c := j.c
	if !j.haveBase || c.New || c.Whole || len(c.Sources) > 0 || j.p1.IsNull() || c.Kept > j.baseLen || rewritten(c) {
		return false
	}
	spans := make([]delta.Span, len(c.Dirty))
	for i, r := range c.Dirty {
		spans[i] = delta.Span{Off: r.Off, Len: r.Len}
	}
	at := time.Now() // see put
	d, err := delta.EncodeWrites(j.baseLen, c.Kept, c.Size, spans, countingReader{live, &s.liveRead})
	if err != nil {
		s.log.Debug("no delta from the written ranges", "file", j.fid, "err", err)
		return false
	}
	// Not waited for here: the window's puts share one group commit
	// (durable), which a window running its jobs one after another would
	// otherwise pay once per in-place change.
	e, commit, err := s.st.PutDeltaNoWait(ctx, objstore.PutRequest{File: j.fid, P1: j.p1, Delta: d, DeltaBase: j.p1, DeltaOnly: true, Size: uint64(c.Size), Time: at, Name: c.Path})
	if err != nil {
		s.log.Debug("written ranges not stored alone; recording the whole file", "file", j.fid, "err", err)
		return false
	}
	j.entry, j.size, j.commit = e, c.Size, commit
	return true
}

// rewritten reports whether c wrote most of its file (an O_TRUNC rewrite,
// a save in place). Its written ranges would be stored as literal bytes and
// compressed, at zstd's ~150 MB/s, though most of them usually equal the
// previous revision's, and then refused as no smaller than the text, which
// is then read and put whole anyway; diffing the whole file against the
// previous text (cached by the store) costs a read and a compare at memory
// speed and stores only what really changed. M6 (600 O_TRUNC rewrites of
// 8 MiB, small edits each) spent 85% of the mount's CPU compressing such
// literals.
func rewritten(c *fs.Change) bool {
	var n int64
	for _, r := range c.Dirty {
		n += r.Len
	}
	return n > c.Size/2
}

// countingReader counts the bytes read from the live file. It is an
// objstore.FileReader: a streamed put maps the file (and skips its
// holes), and counts what it reads so.
type countingReader struct {
	r io.ReaderAt
	n *atomic.Int64
}

var _ objstore.FileReader = countingReader{}

func (c countingReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.n.Add(int64(n))
	return n, err
}

func (c countingReader) File() *os.File {
	f, _ := c.r.(*os.File)
	return f
}

func (c countingReader) Mapped(n int64) { c.n.Add(n) }

// bind maps id to fid, in memory and (by syncIDs) in the ids file;
// syncIDs makes the record durable, which must happen before a revision
// of fid is put.
func (s *storeSink) bind(id fs.FileID, fid index.FileID) error {
	if s.ids[id] == fid {
		return nil
	}
	s.idsMu.Lock()
	s.ids[id] = fid
	s.idsMu.Unlock()
	s.unwritten = appendIDRecord(s.unwritten, id, fid)
	return nil
}

// transfer gives the live file id the history of the store file fid,
// which the live file old had (an atomic save: id was renamed over old).
// old loses it: its inode may live on, through a hard link or an open
// descriptor, and its later changes must not be recorded as the path's
// file, over id's content; they start a store file of their own (its
// first revision's second parent is fid's newest revision now, see
// forked). syncIDs makes both records durable.
func (s *storeSink) transfer(id, old fs.FileID, fid index.FileID) error {
	if err := s.bind(id, fid); err != nil {
		return err
	}
	if old == id || s.ids[old] != fid {
		return nil
	}
	if _, ok := s.forked[old]; !ok {
		s.forkedOrder = append(s.forkedOrder, old)
		if len(s.forkedOrder) > maxForked {
			delete(s.forked, s.forkedOrder[0])
			s.forkedOrder = s.forkedOrder[1:]
		}
	}
	s.forked[old] = s.prev(fid)
	s.idsMu.Lock()
	delete(s.ids, old)
	s.idsMu.Unlock()
	s.unwritten = appendIDRecord(s.unwritten, old, 0) // 0: no store file
	return nil
}

// maxForked caps the sink's forked map.
const maxForked = 4096

// syncIDs appends the records bound since its last call to the ids file
// and makes them durable; after a failure it fails for good (idsErr).
func (s *storeSink) syncIDs() error {
	if s.idsErr != nil {
		return s.idsErr
	}
	if len(s.unwritten) == 0 {
		return nil
	}
	if err := s.writeIDs(); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return s.idsFailed(fmt.Errorf("fsync %s: %w", idsFile, err))
	}
	s.idSyncs++
	return nil
}

// writeIDs appends the records bound since the last write, with one
// write(2).
func (s *storeSink) writeIDs() error {
	if s.idsErr != nil || len(s.unwritten) == 0 {
		return s.idsErr
	}
	_, err := s.f.Write(s.unwritten)
	s.unwritten = s.unwritten[:0]
	if err != nil {
		return s.idsFailed(fmt.Errorf("append %s: %w", idsFile, err))
	}
	return nil
}

// idsFailed stops the sink after err, a failed write or fsync of the ids
// file (see idsErr), and returns the error every later put gets.
func (s *storeSink) idsFailed(err error) error {
	s.idsErr = fmt.Errorf("%w; no revision is recorded until the next mount", err)
	s.log.Error("the map of live files to their histories cannot be written; recording stopped", "err", err)
	return s.idsErr
}

// notBefore returns t, or the time of revision p1 if t is before it: a
// revision's time never goes before its first parent's (a temp file's
// content, read at its report, may have been read before the original's
// last change, recorded after it). Only puts of content read earlier
// than the put need it: a put at time.Now() comes after its parent's.
func (s *storeSink) notBefore(p1 index.RevID, t time.Time) time.Time {
	if p1.IsNull() {
		return t
	}
	e, err := s.st.Entry(p1)
	if err != nil {
		return t
	}
	if pt := time.Unix(0, e.Time); t.Before(pt) {
		return pt
	}
	return t
}

// prev returns the newest revision of fid, or the null RevID.
func (s *storeSink) prev(fid index.FileID) index.RevID {
	if r, ok := s.last[fid]; ok {
		return r
	}
	e, ok, err := s.st.Latest(fid) // not Revs-1: gc leaves gaps
	if err != nil || !ok {
		if err != nil {
			s.log.Warn("newest revision unreadable; recording without a parent", "file", fid, "err", err)
		}
		return index.RevID{}
	}
	r := e.ID()
	s.last[fid] = r
	return r
}
