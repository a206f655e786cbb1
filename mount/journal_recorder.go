package mount

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"

	"github.com/deltafs/deltafs/fs"
)

// journaled is the fs.Recorder of a mount: the Recorder, with the
// pending journal kept in step (j is nil on a read-only mount).
type journaled struct {
	*Recorder
	j *journal
	x *excluder // paths left out of history (exclude.go); nil: none
}

var (
	_ fs.Recorder      = journaled{}
	_ fs.ReadWaiter    = journaled{}
	_ fs.ReleaseReader = journaled{}
	_ fs.Undirtier     = journaled{}
	_ fs.CloseNoter    = journaled{}
	_ fs.RedoWaiter    = journaled{}

	_ fs.QuietRecorder = journaled{}
)

// Dirtied journals id before its live file changes, with the file that
// left its path lately, whose history a new file there continues
// (vacated.go), so that the redo after a crash continues it too; and
// keeps a held change of id from being read under the writer
// (Recorder.dirtied).
func (r journaled) Dirtied(id fs.FileID, path string) {
	if r.j != nil {
		r.j.dirtied(id, path, r.Recorder.leftBy(path, id, func() (uint32, bool) {
			var st syscall.Stat_t
			err := syscall.Lstat(filepath.Join(filepath.Dir(r.j.path), liveDir, filepath.FromSlash(path)), &st)
			return st.Uid, err == nil
		}))
	}
	r.Recorder.dirtied(id)
}

// Undirtied takes back the last Dirtied of id (a writer that changed
// nothing): the journal clears id once the changes reported before are
// recorded, and a change the Recorder held for that writer is released
// when its time comes again (Recorder.undirtied).
func (r journaled) Undirtied(id fs.FileID) {
	if r.j != nil {
		r.j.undirtied(id)
	}
	r.Recorder.undirtied(id)
}

// Closed releases a change of id held back for the fsync interval once
// its writer has closed (Recorder.writerClosed).
func (r journaled) Closed(id fs.FileID) { r.Recorder.writerClosed(id) }

// Changed stamps c for the journal and queues it. A change of an
// excluded path is dropped and its file kept pending (exclude.go),
// unless the Recorder holds an earlier change of the file, which it
// merges with as before.
func (r journaled) Changed(c fs.Change) {
	if r.x.excluded(c.Path) && !r.Recorder.holding(key(&c)) {
		if r.j != nil {
			r.j.keep(c.ID, c.Path)
		}
		r.Recorder.dropped(&c)
		return
	}
	if r.j != nil {
		r.j.reported(&c)
	}
	r.Recorder.Changed(c)
}

// Wait is the Recorder's Wait (fsync calls it after its report, outside
// the file's lock). When the Recorder holds the file's change back (one
// revision per interval, a new file's grace), fsync returns before the
// revision exists, so the journal entry is made durable first: the
// file's data is durable once fsync returns, and a power cut must not
// leave it newer than history with nothing to say so.
func (r journaled) Wait(ctx context.Context, id fs.FileID) error {
	if r.j != nil && r.Recorder.holding(id) {
		r.j.sync()
	}
	return r.Recorder.Wait(ctx, id)
}

// Renamed keeps the journal's path hints and atomic saves, and records
// the files the rename took out of the excluded paths.
func (r journaled) Renamed(ev fs.Rename) {
	if r.j != nil {
		if !ev.Dir && !ev.Exchange && !ev.Replaced.IsZero() && r.x.excluded(ev.To) {
			r.j.forget(ev.Replaced, ev.To) // as Removed: the rename unlinked it
		}
		r.j.renamed(ev)
	}
	redos := r.leaving(ev)
	if len(redos) > 0 && !ev.Replaced.IsZero() {
		// The replaced file's revision held back (a new file's grace)
		// comes first: the saved content continues it.
		r.Recorder.release(ev.Replaced)
	}
	r.Recorder.Renamed(ev)
	for _, rd := range redos {
		r.Recorder.queueRedo(rd)
	}
}

// Removed takes an excluded file the unlink removed out of the journal
// (journal.forget): it was kept pending for snapshots and renames out of
// the patterns, and an excluded file no path holds needs neither. Kept,
// every excluded file a long mount ever made stayed in the journal and
// its memory (a build's objects, rm -rf node_modules).
func (r journaled) Removed(ev fs.Remove) {
	if r.j != nil && !ev.Dir && !ev.ID.IsZero() && r.x.excluded(ev.Path) {
		r.j.forget(ev.ID, ev.Path)
	}
	r.Recorder.Removed(ev)
}

// holding reports whether the Recorder holds back a change of k.
func (r *Recorder) holding(k fs.FileID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[k] != nil
}

// queueRedo queues the redo of a pending file behind everything reported
// so far, so that Sync (snapshots, unmount) waits for it, and Wait and
// Flush of that file (fsync, its history view) too, and its first writer
// in this mount (Redoing).
func (r *Recorder) queueRedo(rd *redo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.push(Event{redo: rd})
	r.seq[rd.id] = r.enq
	delete(r.reads, rd.id) // WaitRead waits for the redo to finish
	r.redoUntil = r.enq
	r.redoing.Store(true)
	if r.redoSeq == nil {
		r.redoSeq = map[fs.FileID]uint64{}
	}
	r.redoSeq[rd.id] = r.enq
}

// RedoPending implements fs.RedoWaiter: a redo of file id is queued and
// not done.
func (r *Recorder) RedoPending(id fs.FileID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.redoSeq[id] > r.done
}

// waitRedos returns when every redo queued so far has run, or ctx ends.
func (r *Recorder) waitRedos(ctx context.Context) error {
	r.mu.Lock()
	target := r.redoUntil
	r.mu.Unlock()
	return r.waitFor(ctx, target)
}

// Redoing implements fs.RedoWaiter: a redo is queued and not done, so a
// writer of a file it reported nothing of yet waits for the file's
// changes (the redo's) before changing it. One atomic load.
func (r *Recorder) Redoing() bool { return r.redoing.Load() }

// journalSink tells the journal which changes are recorded, and runs the
// redos.
type journalSink struct {
	ls *lockedSink
	j  *journal
	rd *redoer
	sw *spaceWait // resumes recording after a full disk (space.go)
}

// RecordBatch implements BatchSink: redos one at a time, the events
// between them in lockedSink's windows.
func (s journalSink) RecordBatch(ctx context.Context, evs []Event, done func([]error)) {
	for len(evs) > 0 {
		if evs[0].redo != nil {
			errs := []error{s.rd.run(ctx, evs[0].redo)}
			s.sw.failed(errs)
			done(errs)
			evs = evs[1:]
			continue
		}
		n := 1
		for n < len(evs) && evs[n].redo == nil {
			n++
		}
		run := evs[:n]
		var cs []*fs.Change
		s.ls.RecordBatch(ctx, run, func(errs []error) {
			cs = cs[:0]
			for i := range errs {
				cs = append(cs, run[i].Change)
			}
			s.j.recordedAll(cs, journalErrs(errs))
			s.sw.failed(errs)
			run = run[len(errs):]
			done(errs)
		})
		evs = evs[n:]
	}
}

// Ignores implements IgnoringSink: the redos are the journal sink's own,
// the rest is the store sink's business.
func (s journalSink) Ignores(ev Event) bool { return s.ls.Ignores(ev) }

func (s journalSink) Record(ctx context.Context, ev Event) error {
	var err error
	if ev.redo != nil {
		err = s.rd.run(ctx, ev.redo)
	} else {
		err = s.ls.Record(ctx, ev)
		if ev.Change != nil {
			s.j.recorded(ev.Change, err == nil || errors.Is(err, errTooLarge))
		}
	}
	s.sw.failed([]error{err})
	return err
}

// journalErrs is errs as the journal takes them (recordedAll): a change
// too large to record (errTooLarge) is done with, as one recorded is.
// Kept pending, it kept the store marked (unclean.go) until the next
// mount's redo dropped it, and that mount checked every live file.
func journalErrs(errs []error) []error {
	out := make([]error, len(errs))
	for i, err := range errs {
		if !errors.Is(err, errTooLarge) {
			out[i] = err
		}
	}
	return out
}
