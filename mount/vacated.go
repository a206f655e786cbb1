package mount

import (
	"strings"
	"time"

	"github.com/deltafs/deltafs/fs"
)

// A save that does not rename a temp file over the original leaves the
// original's path first and then makes a new file there: Vim (its
// default writebackup, backupcopy=auto outside /tmp) renames f to f~,
// creates a new f, writes it and unlinks f~; git checkout unlinks f and
// creates it with O_EXCL. The new file has no history; the Recorder
// remembers which file left which path (Renamed away, Removed by an
// unlink) for vacateWindow, and a new file whose first change is reported
// at such a path, or that is renamed to it, continues the history of the
// file that left (Event.Continues, as a temp file renamed over the
// original does): its first revision is a delta against the old content.
//
// The memory is the Recorder's, not kept across mounts: a file made at a
// vacated path after a remount starts a history of its own. The pending
// journal notes, at the new file's first write, which file it follows
// (leftBy), so that a mount killed before the new file's change was
// recorded still has its redo continue that history (journal_redo.go);
// and a snapshot taken while the new file is still being written takes
// the path for it (Successor, liveRevs.Revision).

// vacateWindow is how long a vacated path waits for its successor, from
// the departure to the new file's first report (at its close or fsync).
// The tools that save this way make the new file at once, and a minute
// leaves room to write a large one; a file made at a path later than that
// (rm f; echo new > f, an hour on) is taken for a new file, not a save.
// Shorter than saveWindow: a rename over another file says "replace it";
// a path left empty for a while does not.
const vacateWindow = time.Minute

// maxVacated caps the paths remembered: an rm -rf of many files keeps
// the latest maxVacated. A forgotten path only costs its successor a
// history of its own (a fulltext).
const maxVacated = 1024

// vacate is a file that left a path.
type vacate struct {
	id  fs.FileID
	uid uint32 // its owner: only a file of the same owner continues its history
	at  time.Time
	to  string // where it was renamed to; "" when unlinked
	seq uint64 // the order of the departures, see vacated.order
}

// vacated maps paths to the file that last left them, with r.mu held.
type vacated struct {
	byPath map[string]vacate
	byID   map[fs.FileID]string // the path each file of byPath left
	order  []vacatedKey         // oldest first; a key whose entry changed since is stale
	seq    uint64               // departures noted
	window time.Duration        // vacateWindow (tests shorten it)
}

type vacatedKey struct {
	path string
	at   time.Time
	seq  uint64
}

// current reports whether k is the key of its path's entry.
func (v *vacated) current(k vacatedKey) bool {
	e, ok := v.byPath[k.path]
	return ok && e.seq == k.seq
}

// left notes that file id left path at time at (renamed to to, or
// unlinked when to is ""), forgetting what expired and what is past
// the cap.
func (v *vacated) left(path string, id fs.FileID, uid uint32, to string, at time.Time) {
	if v.byPath == nil {
		v.byPath, v.byID = map[string]vacate{}, map[fs.FileID]string{}
	}
	v.forget(path)
	if p, ok := v.byID[id]; ok { // it left another path before: that one is stale
		v.forget(p)
	}
	v.seq++
	v.byPath[path], v.byID[id] = vacate{id: id, uid: uid, at: at, to: to, seq: v.seq}, path
	v.order = append(v.order, vacatedKey{path, at, v.seq})
	for len(v.order) > 0 && (len(v.byPath) > maxVacated || at.Sub(v.order[0].at) >= v.window) {
		k := v.order[0]
		v.order = v.order[1:]
		if v.current(k) {
			v.forget(k.path)
		}
	}
	if len(v.order) > 2*maxVacated { // paths vacated again and again, or taken
		kept := v.order[:0]
		for _, k := range v.order {
			if v.current(k) {
				kept = append(kept, k)
			}
		}
		v.order = kept
	}
}

// forget forgets path: something else is there now, or its file moved on.
func (v *vacated) forget(path string) {
	if e, ok := v.byPath[path]; ok {
		delete(v.byPath, path)
		delete(v.byID, e.id)
	}
}

// changed forgets the path file id left, if any: a file renamed away and
// changed there is a file of its own, not a save's original.
func (v *vacated) changed(id fs.FileID) {
	if p, ok := v.byID[id]; ok {
		v.forget(p)
	}
}

// movedDir forgets every path under dir (a directory renamed from or to
// dir): the files there now are not the ones that left.
func (v *vacated) movedDir(dir string) {
	v.forget(dir)
	for p := range v.byPath {
		if strings.HasPrefix(p, dir+"/") {
			v.forget(p)
		}
	}
}

// take returns, and forgets, the file that left path less than
// vacateWindow before now, unless it is id (the new file itself) or
// another owner's than uid, id's: a history is its owner's to read
// (.history), and another user's new file at the path must not show the
// old file's revisions to its owner.
func (v *vacated) take(path string, id fs.FileID, uid uint32, now time.Time) (vacate, bool) {
	e, ok := v.byPath[path]
	if !ok || e.id == id || now.Sub(e.at) >= v.window || e.uid != uid {
		return vacate{}, false
	}
	v.forget(path)
	return e, true
}

// succeed returns the file that new file id, first reported at path (or
// renamed there), continues (zero: none) and where that file lives on,
// with r.mu held. That file's held change is queued first, so that the
// sink knows its history when it records id's.
func (r *Recorder) succeed(path string, id fs.FileID, uid uint32, now time.Time) (fs.FileID, string) {
	v, ok := r.vac.take(path, id, uid, now)
	if !ok {
		return fs.FileID{}, ""
	}
	r.forksElsewhere(v)
	r.releaseLocked(v.id)
	return v.id, v.to
}

// forksElsewhere notes, for a file that left its path by an unlink while
// it lives on under another name (elsewhere) and whose history a new
// file takes, that it may have moved: it forks, named by the path it
// left, and its last removal names it by its own path (moves). Noted
// at its unlink, every object git add links and unlinks was, and their
// later removals named each a deleted file's history, an index write
// apiece.
func (r *Recorder) forksElsewhere(v vacate) {
	if strings.HasPrefix(v.to, elsewhere("")) {
		r.moves.add(v.id)
	}
}

// Successor is succeed for a snapshot that records new file id, at
// path, before the file's first report (liveRevs.Revision: a file still
// open for writing): the file it continues, if any, and where that one
// lives on. The path is then taken, and the file's own report later
// continues nothing: it is bound to the history by then.
func (r *Recorder) Successor(path string, id fs.FileID, uid uint32) (fs.FileID, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.succeed(path, id, uid, time.Now())
}

// leftBy returns the file that left path less than vacateWindow ago,
// unless it is id: the file whose history a new file id made there
// continues, once its first report takes the path (succeed). The
// journal notes it at the new file's first write, for a redo after a
// crash, when the Recorder's memory is gone.
//
// owner returns the new file's owner; it is called only when a file
// left the path, and that file's owner must be the same (take).
func (r *Recorder) leftBy(path string, id fs.FileID, owner func() (uint32, bool)) fs.FileID {
	r.mu.Lock()
	e, ok := r.vac.byPath[path]
	r.mu.Unlock()
	if !ok || e.id == id || time.Since(e.at) >= r.vac.window {
		return fs.FileID{}
	}
	if uid, ok := owner(); !ok || uid != e.uid {
		return fs.FileID{}
	}
	return e.id
}

// renamedPaths keeps the vacated paths in step with rename ev, with r.mu
// held. A young file renamed over another (born lately, see
// births) is an atomic save's temp file: the save's last step, not a
// departure, as its next temp file is not the saved file's successor.
// An older one renamed over another departs as any renamed file does:
// Emacs renames f over the backup f~ an earlier session left, and then
// writes a new f, which continues f's history.
func (r *Recorder) renamedPaths(ev fs.Rename) {
	switch {
	case ev.Dir:
		r.vac.movedDir(ev.From)
		r.vac.movedDir(ev.To)
	case ev.Exchange || ev.ID.IsZero() || !ev.Replaced.IsZero() && r.births.young(ev.ID, time.Now()):
		r.vac.forget(ev.From)
		r.vac.forget(ev.To)
	default:
		r.vac.forget(ev.To)
		r.vac.left(ev.From, ev.ID, ev.Uid, ev.To, time.Now())
	}
}

// maxBirths caps the new files births remembers: past it, the oldest are
// forgotten and taken for old files (a file forgotten so and then
// renamed over another leaves its path for a successor, which costs
// nothing unless a new file is made there within vacateWindow).
const maxBirths = 1 << 14

// births remembers when new files were first reported, for window (the
// sink's saveWindow: a file whose history began less than that ago is a
// save's temp file), with r.mu held.
type births struct {
	at     map[fs.FileID]time.Time
	order  []fs.FileID // oldest first
	window time.Duration
}

// born notes that new file id was first reported at now.
func (b *births) born(id fs.FileID, now time.Time) {
	if b.at == nil {
		b.at = map[fs.FileID]time.Time{}
	}
	if _, ok := b.at[id]; ok || id.IsZero() {
		return
	}
	b.at[id] = now
	b.order = append(b.order, id)
	for len(b.order) > 0 && (len(b.at) > maxBirths || now.Sub(b.at[b.order[0]]) >= b.window) {
		delete(b.at, b.order[0])
		b.order = b.order[1:]
	}
}

// young reports whether id was first reported less than window before now.
func (b *births) young(id fs.FileID, now time.Time) bool {
	t, ok := b.at[id]
	return ok && now.Sub(t) < b.window
}

// moves remembers which files may have moved in this mount, with r.mu
// held: the store sink names a removed file's history by the path it
// left only when it may differ from the path its last revision was
// recorded at (storeSink.removed), so that an rm -rf of files that
// never moved queues nothing.
type moves struct {
	ids  map[fs.FileID]struct{}
	dirs bool // a directory moved, or too many files did: any file may have
}

// maxMoves caps the files moves remembers one by one.
const maxMoves = 1 << 16

// note takes rename ev into account.
func (m *moves) note(ev fs.Rename) {
	if ev.Dir || len(m.ids) >= maxMoves {
		m.dirs = true
		return
	}
	if m.ids == nil {
		m.ids = map[fs.FileID]struct{}{}
	}
	for _, id := range []fs.FileID{ev.ID, ev.Replaced} { // an exchange moves both
		if !id.IsZero() && (id == ev.ID || ev.Exchange) {
			m.ids[id] = struct{}{}
		}
	}
}

// add notes that file id left a path it may have had its last revision
// recorded at while it lives on under another name (an unlink of one of
// its links): its last unlink names its history by the path it left.
func (m *moves) add(id fs.FileID) {
	if len(m.ids) >= maxMoves {
		m.dirs = true
		return
	}
	if m.ids == nil {
		m.ids = map[fs.FileID]struct{}{}
	}
	m.ids[id] = struct{}{}
}

// moved reports whether file id may have moved.
func (m *moves) moved(id fs.FileID) bool {
	_, ok := m.ids[id]
	return m.dirs || ok
}
