package mount

import (
	"context"
	"encoding/binary"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deltafs/deltafs/fs"
)

// Event is one thing the live tree reported, as handed to a Sink. Exactly
// one of the pointers is set.
type Event struct {
	Change *fs.Change
	Rename *fs.Rename
	Remove *fs.Remove
	Link   *fs.Link
	// Continues is set on a Change of a new file that was then renamed
	// over an existing file (an editor's atomic save): the change
	// continues that file's history instead of starting its own; or of a
	// new file made at a path another file left (vacated.go).
	Continues fs.FileID
	// LivesAt is where the file Continues names went when it left the
	// path by a rename (vacated.go): the sink forks its history there if
	// it is still alive.
	LivesAt string
	// Moved is set on a Remove of a file that may have moved in this
	// mount (renamed itself, or a directory was): its path may not be
	// the one its last revision was recorded at (see Recorder.moved).
	Moved bool

	redo *redo // a pending file of the journal to redo (journal_redo.go)
	// read is signalled once the sink has read what it records of the
	// change from the live file (see Recorder.WaitRead); nil for other
	// events.
	read *readSignal
}

// readSignal is closed once, by the sink when it has read a change's
// live content (readDone); nil-safe.
type readSignal struct {
	once sync.Once
	ch   chan struct{}
}

func newReadSignal() *readSignal { return &readSignal{ch: make(chan struct{})} }

func (s *readSignal) readDone() {
	if s != nil {
		s.once.Do(func() { close(s.ch) })
	}
}

// Sink records events, one at a time, in the order they happened. It
// owns Change.Content and must close it.
type Sink interface {
	Record(ctx context.Context, ev Event) error
}

// An IgnoringSink records nothing for some events (the store sink keeps
// no trace of removals and links, see storeSink.Ignores). The Recorder
// does not queue those: an rm -rf then does not wake the recording
// goroutine once per unlink, and a backlog of changes is not cut into
// windows of one by the links and removals between them (git links each
// new object into place and unlinks its temporary name).
type IgnoringSink interface {
	Sink
	Ignores(ev Event) bool
}

// newFileGrace is how long the change of a newly created file is held
// before recording: long enough for an editor's "write temp file, rename
// over the original" to arrive, so that the temp file's content is
// recorded as the next revision of the original (a small delta) rather
// than as a new file (a fulltext).
const newFileGrace = 200 * time.Millisecond

// writerHold is how long past its time a held change waits for the
// report of a writer that reopened its file (Recorder.dirtied): long
// enough for a save's temp file reopened to be fsynced and renamed, short
// enough that a file fsynced once and kept open, idle (a log, a
// database), is recorded soon, not at its next fsync or close.
const writerHold = time.Second

// Recorder is the fs.Recorder of a mount: it queues events and hands
// them to a Sink from one background goroutine, so that close(2) never
// waits for recording. It holds back fsync reports so that a file
// records at most one revision per interval (the last change is never
// left behind: the held change is released when its interval ends, at
// the next close, and by Sync).
type Recorder struct {
	sink     Sink
	ignores  func(Event) bool // nil: the sink takes every event
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	queue   []Event
	held    map[fs.FileID]*heldChange
	last    map[fs.FileID]time.Time   // when a file's last fsynced change was queued
	seq     map[fs.FileID]uint64      // queue position of a file's last change
	reads   map[fs.FileID]*readSignal // read signal of the event at seq, if a change
	bound   map[fs.FileID]uint64      // queue position of the last rename of a file over another
	vac     vacated                   // paths files left lately (vacated.go)
	births  births                    // when new files were first reported (vacated.go)
	moves   moves                     // which files may have moved (Event.Moved)
	reports uint64                    // Changed calls so far
	enq     uint64                    // events queued so far
	done    uint64                    // events the sink finished
	// redoUntil is the queue position of the last redo queued; redoing
	// is set while done is below it (Redoing, read without mu). redoSeq
	// holds each redo's position until then (RedoPending).
	redoUntil uint64
	redoing   atomic.Bool
	redoSeq   map[fs.FileID]uint64
	waiters   []waiter
	closed    bool
	wake      chan struct{}
	urgent    chan struct{} // a waiter came: stop lingering (see run)
	exited    chan struct{}
}

type heldChange struct {
	c         fs.Change
	continues fs.FileID
	livesAt   string
	timer     *time.Timer
	due       time.Time // when timer releases the change
	newDue    time.Time // when a held new file's grace ends; later closes do not extend it
	// writing is set once a writer started changing the file (dirtied):
	// the timer no longer releases the change, the writer's report does
	writing bool
}

type waiter struct {
	seq uint64
	ch  chan struct{}
}

// NewRecorder starts a Recorder handing events to sink; interval is the
// least time between two revisions of one file caused by fsync.
func NewRecorder(sink Sink, interval time.Duration, log *slog.Logger) *Recorder {
	r := &Recorder{
		sink: sink, log: log, interval: interval,
		held: map[fs.FileID]*heldChange{}, last: map[fs.FileID]time.Time{}, seq: map[fs.FileID]uint64{}, bound: map[fs.FileID]uint64{},
		reads: map[fs.FileID]*readSignal{},
		wake:  make(chan struct{}, 1), urgent: make(chan struct{}, 1), exited: make(chan struct{}),
		vac: vacated{window: vacateWindow}, births: births{window: saveWindow},
	}
	if is, ok := sink.(IgnoringSink); ok {
		r.ignores = is.Ignores
	}
	go r.run()
	return r
}

// key identifies a file for coalescing: its FileID, or its inode number
// when the live filesystem keeps no ids.
func key(c *fs.Change) fs.FileID {
	if !c.ID.IsZero() {
		return c.ID
	}
	var k fs.FileID
	binary.BigEndian.PutUint64(k[8:], c.Ino)
	return k
}

// Changed queues c, or holds it (fsync within the interval, new file).
func (r *Recorder) Changed(c fs.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports++
	k := key(&c)
	var cont fs.FileID
	var livesAt string
	now := time.Now()
	newDue := now.Add(newFileGrace)
	if h := r.held[k]; h != nil {
		h.timer.Stop()
		delete(r.held, k)
		c, cont, livesAt = merge(h.c, c), h.continues, h.livesAt
		if !h.newDue.IsZero() {
			newDue = h.newDue
		}
	}
	r.vac.changed(c.ID)
	if c.New {
		r.births.born(c.ID, now)
	}
	if c.New && cont.IsZero() && !c.ID.IsZero() {
		cont, livesAt = r.succeed(c.Path, c.ID, c.Uid, now)
	}
	wait := time.Duration(0)
	if c.Fsync {
		wait = r.last[k].Add(r.interval).Sub(now)
	}
	if c.New {
		// The grace runs from the first close: a file rewritten again and
		// again is recorded newFileGrace after it first closed, not only
		// once it goes quiet.
		wait = max(wait, newDue.Sub(now))
	} else {
		newDue = time.Time{}
	}
	if wait > 0 {
		r.held[k] = &heldChange{c: c, continues: cont, livesAt: livesAt, newDue: newDue, due: now.Add(wait), timer: time.AfterFunc(wait, func() { r.release(k) })}
		return
	}
	if c.Fsync {
		r.last[k] = now // the interval runs from the last fsync recorded
	}
	r.pushChange(k, Event{Change: &c, Continues: cont, LivesAt: livesAt})
}

// dropped counts a change that is not recorded (an excluded path) and
// lets go of its content.
func (r *Recorder) dropped(c *fs.Change) {
	r.mu.Lock()
	r.reports++
	r.mu.Unlock()
	c.Close()
}

// pushChange queues the change ev of file k, with r.mu held.
func (r *Recorder) pushChange(k fs.FileID, ev Event) {
	ev.read = newReadSignal()
	r.push(ev)
	r.seq[k], r.reads[k] = r.enq, ev.read
}

// release queues the held change of k, if still held: once its time has
// come, or, while a writer is changing the file (dirtied), writerHold
// later (its report usually comes first and merges with it).
func (r *Recorder) release(k fs.FileID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.held[k]
	if h == nil {
		return
	}
	if wait := time.Until(h.due.Add(writerHold)); h.writing && wait > 0 {
		h.timer = time.AfterFunc(wait, func() { r.release(k) })
		return
	}
	r.releaseLocked(k)
}

// dirtied notes that a writer is about to change file id (fs's
// Recorder.Dirtied: the first write, truncation or passthrough open of a
// write session). A change of id held back (a new file's grace, the
// fsync interval) would be read from the live file when its timer fires,
// under that writer, and record a mix of two versions; instead it stays
// held until the writer's report, which merges with it (Changed), or for
// writerHold past its time at most (a writer that stays open, idle). A
// reopened temp file of an atomic save so still continues the file it
// replaces. Sync, Flush and a rename release it as before.
func (r *Recorder) dirtied(id fs.FileID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.held[id]; h != nil {
		h.writing = true
	}
}

// undirtied notes that the writer dirtied waited for changed nothing
// (fs's Undirtier): no report will merge with a change of id it kept
// held, so the timer releases it again, at once if its time has come.
func (r *Recorder) undirtied(id fs.FileID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.held[id]
	if h == nil || !h.writing {
		return
	}
	h.writing = false
	h.timer.Stop()
	h.timer = time.AfterFunc(max(time.Until(h.due), 0), func() { r.release(id) })
}

// writerClosed notes that the last writer of file id closed with nothing
// changed since its last report. A change of id held for the fsync
// interval is then a closed file's change, a revision of its own: it is
// released now, not at the interval's end, where the next change of the
// file (an append, another save) would merge with it and leave the saved
// version in no revision. The interval still merges the fsyncs of one
// open writer (a database, a log). A new file keeps its grace (an atomic
// save's rename comes after the temp file's close), and a change another
// writer is changing the file under (dirtied) waits for that writer's
// report as before.
func (r *Recorder) writerClosed(id fs.FileID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.held[id]
	if h == nil || h.writing || !h.c.Fsync {
		return
	}
	if wait := time.Until(h.newDue); wait > 0 {
		if h.due.After(h.newDue) {
			h.timer.Stop()
			h.due = h.newDue
			h.timer = time.AfterFunc(wait, func() { r.release(id) })
		}
		return
	}
	r.releaseLocked(id)
}

func (r *Recorder) releaseLocked(k fs.FileID) {
	h := r.held[k]
	if h == nil {
		return
	}
	h.timer.Stop()
	delete(r.held, k)
	if h.c.Fsync {
		r.last[k] = time.Now()
	}
	r.pushChange(k, Event{Change: &h.c, Continues: h.continues, LivesAt: h.livesAt})
}

// Renamed queues r; a held new file renamed over another file, or to a
// path another file left lately (vacated.go), continues that file's
// history.
func (r *Recorder) Renamed(ev fs.Rename) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.moves.note(ev)
	if ev.ReplacedElsewhere {
		r.moves.add(ev.Replaced) // it forks, named by the path it left
	}
	if h := r.held[ev.ID]; h != nil && !ev.ID.IsZero() {
		if !ev.Replaced.IsZero() {
			r.releaseLocked(ev.Replaced) // the original's revision comes first
		}
		switch {
		case !ev.Replaced.IsZero() && !ev.Exchange && h.c.New && ev.Uid == ev.ReplacedUid:
			// (a replaced file that lives on through another link forks
			// at the rename's own event: storeSink.renamedOver; another
			// owner's file does not take the replaced one's history)
			h.continues, h.livesAt = ev.Replaced, ""
		case ev.Replaced.IsZero() && !ev.Exchange && h.c.New && h.continues.IsZero():
			h.continues, h.livesAt = r.succeed(ev.To, ev.ID, ev.Uid, time.Now())
		}
		h.c.Path = ev.To
		r.releaseLocked(ev.ID)
	} else if ev.Replaced.IsZero() && !ev.Exchange && !ev.ID.IsZero() && r.births.young(ev.ID, time.Now()) {
		// A young file already recorded, renamed to a path another
		// file left lately (a safe write slower than the new-file
		// grace: the temp file closed, f moved away or removed, the
		// temp file renamed to f): the rename binds as one over f
		// would (storeSink.renamedOver), the original, if it lives on
		// where it went, forking.
		if v, ok := r.vac.take(ev.To, ev.ID, ev.Uid, time.Now()); ok {
			r.releaseLocked(v.id) // the original's revision comes first
			r.forksElsewhere(v)
			ev.Replaced, ev.ReplacedUid, ev.ReplacedLivesAt = v.id, v.uid, v.to
		}
	}
	r.renamedPaths(ev)
	if r.pushUnlessIgnored(Event{Rename: &ev}) && !ev.ID.IsZero() && !ev.Replaced.IsZero() {
		r.bound[ev.ID] = r.enq // the sink may give it the replaced file's history
	}
}

func (r *Recorder) Removed(ev fs.Remove) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ev.Dir && !ev.ID.IsZero() {
		to := ""
		if ev.Nlink > 0 { // it lives on under another name
			to = elsewhere(ev.Path)
			for _, h := range r.held { // a save's original, held to fork where it went
				if h.continues == ev.ID && h.livesAt == ev.Path {
					h.livesAt = to
					r.moves.add(ev.ID) // it forks, named by the path it left
				}
			}
		}
		r.vac.left(ev.Path, ev.ID, ev.Uid, to, time.Now())
	}
	r.pushUnlessIgnored(Event{Remove: &ev, Moved: r.moves.moved(ev.ID)})
}

// TakesUnlinks implements fs.UnlinkListener: the Recorder notes which
// file an unlink took from which path (vacated.go), whatever its sink.
func (r *Recorder) TakesUnlinks() bool { return true }

// IgnoresRemovesAndLinks implements fs.QuietRecorder: true when the
// sink ignores every removal and link (the store sink does), so that the
// live tree does not gather them for nothing.
func (r *Recorder) IgnoresRemovesAndLinks() bool {
	return r.ignores != nil && r.ignores(Event{Remove: &fs.Remove{}}) && r.ignores(Event{Link: &fs.Link{}})
}

func (r *Recorder) Linked(ev fs.Link) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pushUnlessIgnored(Event{Link: &ev})
}

// pushUnlessIgnored queues ev unless the sink ignores it, with r.mu held,
// and reports whether it queued it.
func (r *Recorder) pushUnlessIgnored(ev Event) bool {
	if r.ignores != nil && r.ignores(ev) {
		return false
	}
	r.push(ev)
	return true
}

// push queues ev, with r.mu held.
func (r *Recorder) push(ev Event) {
	if r.closed {
		if ev.Change != nil {
			ev.Change.Close()
		}
		r.log.Error("event after the recorder closed; dropped")
		return
	}
	r.queue = append(r.queue, ev)
	r.enq++
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Wait returns when the queued changes of file id are recorded; a change
// held back (fsync within its interval, a new file's grace) is not waited
// for: its data is durable in the live file already.
func (r *Recorder) Wait(ctx context.Context, id fs.FileID) error {
	r.mu.Lock()
	target := r.seq[id]
	r.mu.Unlock()
	return r.waitFor(ctx, target)
}

// WaitRead is Wait for a writer about to change file id again (its
// writable open, a truncate): it returns as soon as the sink has read
// from the live file what it records of the changes queued so far, so
// the writer's next revision is written while the previous one is put
// and committed (M6: an O_TRUNC rewrite per revision waited for the
// whole recording, commit included, before).
func (r *Recorder) WaitRead(ctx context.Context, id fs.FileID) error {
	r.mu.Lock()
	target, sig := r.seq[id], r.reads[id]
	if r.done >= target {
		r.mu.Unlock()
		return nil
	}
	w := r.addWaiter(target)
	r.mu.Unlock()
	var read chan struct{}
	if sig != nil {
		read = sig.ch
	}
	select {
	case <-w.ch:
	case <-read:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ReleaseRead releases the held change of file id, if any, and returns
// once the sink has read every change of id queued so far (WaitRead):
// fs's keepRemoved calls it, past its cap of kept descriptors, before a
// file whose changes reach it by reference only loses its last name.
//
// A held change a writer is changing the file under (dirtied) stays
// held: read now, it would mix two versions; the writer's report carries
// it (or its timer, writerHold past its time), and the writer's
// descriptor keeps the file.
func (r *Recorder) ReleaseRead(ctx context.Context, id fs.FileID) error {
	r.mu.Lock()
	if h := r.held[id]; h == nil || !h.writing {
		r.releaseLocked(id)
	}
	r.mu.Unlock()
	return r.WaitRead(ctx, id)
}

// Flush releases the held change of file id, if any, and returns when
// every change of it queued so far is recorded: history views call it so
// that they show every change closed before them.
func (r *Recorder) Flush(ctx context.Context, id fs.FileID) error {
	r.mu.Lock()
	r.releaseLocked(id)
	target := r.seq[id]
	r.mu.Unlock()
	return r.waitFor(ctx, target)
}

// Sync releases every held change and returns when the sink has finished
// everything queued so far, or ctx ends.
func (r *Recorder) Sync(ctx context.Context) error {
	r.mu.Lock()
	for k := range r.held {
		r.releaseLocked(k)
	}
	target := r.enq
	r.mu.Unlock()
	return r.waitFor(ctx, target)
}

// Waiting reports whether anyone waits for the recording (Sync, Wait,
// WaitRead, Flush).
func (r *Recorder) Waiting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.waiters) > 0
}

// addWaiter registers a waiter for the first target events, with r.mu
// held, and cuts short the goroutine's lingering (see run).
func (r *Recorder) addWaiter(target uint64) waiter {
	w := waiter{seq: target, ch: make(chan struct{})}
	r.waiters = append(r.waiters, w)
	select {
	case r.urgent <- struct{}{}:
	default:
	}
	return w
}

// waitFor returns when the sink has finished the first target events.
func (r *Recorder) waitFor(ctx context.Context, target uint64) error {
	r.mu.Lock()
	if r.done >= target {
		r.mu.Unlock()
		return nil
	}
	w := r.addWaiter(target)
	r.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close syncs, then stops the background goroutine.
func (r *Recorder) Close(ctx context.Context) error {
	err := r.Sync(ctx)
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	for _, ch := range []chan struct{}{r.wake, r.urgent} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	select {
	case <-r.exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// Lingering: a sink records a batch in windows whose syncs cost the same
// whatever their size, so a trickle of changes (an untar, git writing
// objects: each new file released by its own grace timer) recorded as it
// comes costs those syncs per file or two (measured for git add of
// 10,000 files: 8,690 fsyncs and 17,378 msyncs in the mount). So when
// little is queued and nobody waits, the goroutine lingers a moment for
// more; a waiter (fsync, a snapshot, unmount) cuts the lingering short.
const (
	linger      = 20 * time.Millisecond
	lingerBelow = 64 // events queued; more are recorded at once
)

// run hands queued events to the sink until the Recorder is closed.
func (r *Recorder) run() {
	defer close(r.exited)
	ctx := context.Background()
	for lingered := false; ; {
		r.mu.Lock()
		if !lingered && len(r.queue) > 0 && len(r.queue) < lingerBelow && len(r.waiters) == 0 && !r.closed {
			r.mu.Unlock()
			r.lingerFor(linger)
			lingered = true
			continue
		}
		batch, closed := r.queue, r.closed
		r.queue = nil
		r.mu.Unlock()
		r.record(ctx, batch)
		lingered = false
		if len(batch) == 0 {
			if closed {
				return
			}
			<-r.wake
		}
	}
}

// lingerFor waits d, or less if someone starts waiting for the sink.
func (r *Recorder) lingerFor(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.urgent:
	}
}

// record hands batch to the sink, all at once if it takes batches.
func (r *Recorder) record(ctx context.Context, batch []Event) {
	if len(batch) == 0 {
		return
	}
	if bs, ok := r.sink.(BatchSink); ok {
		bs.RecordBatch(ctx, batch, func(errs []error) {
			for _, err := range errs {
				r.logFailed(err)
			}
			r.finished(len(errs))
		})
		return
	}
	for _, ev := range batch {
		r.logFailed(r.sink.Record(ctx, ev))
		r.finished(1)
	}
}

// logFailed logs a recording's error; a refusal for want of space is
// the journal sink's to tell (space.go), once rather than per file.
func (r *Recorder) logFailed(err error) {
	switch {
	case err == nil:
	case isNoSpace(err):
		r.log.Debug("recording refused", "err", err)
	default:
		r.log.Error("recording failed", "err", err)
	}
}

// finished counts n events done and wakes the Syncs they satisfy.
func (r *Recorder) finished(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done += uint64(n)
	if r.done >= r.redoUntil {
		r.redoing.Store(false)
		r.redoSeq = nil
	}
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if w.seq <= r.done {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	r.waiters = kept
}
