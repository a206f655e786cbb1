package mount

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
)

// memSink keeps the events it is handed.
type memSink struct {
	mu     sync.Mutex
	events []Event
	delay  time.Duration
}

func (s *memSink) Record(_ context.Context, ev Event) error {
	time.Sleep(s.delay)
	if ev.Change != nil {
		ev.Change.Close()
	}
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
	return nil
}

func (s *memSink) changes() []fs.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []fs.Change
	for _, ev := range s.events {
		if ev.Change != nil {
			out = append(out, *ev.Change)
		}
	}
	return out
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// failOnError is a logger that fails t with every record at level Warn
// or above (a recording that failed is logged, not returned).
func failOnError(t testing.TB) *slog.Logger { return slog.New(failHandler{t}) }

type failHandler struct{ t testing.TB }

func (h failHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h failHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h failHandler) WithGroup(string) slog.Handler                { return h }
func (h failHandler) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	h.t.Errorf("logged %s: %s", rec.Level, msg)
	return nil
}

func TestRecorderCoalescesFsyncs(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(sink, time.Hour, quiet())
	id := fs.NewFileID()
	for i := range 50 {
		r.Changed(fs.Change{Path: "db", ID: id, Dirty: []fs.Range{rg(int64(i)*10, 5)}, Kept: 1000, Size: 1000, Fsync: true})
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := sink.changes()
	if len(c) != 2 {
		t.Fatalf("%d revisions for 50 fsyncs within one interval, want 2 (first, and the rest merged)", len(c))
	}
	if len(c[1].Dirty) != 49 || c[1].Dirty[0] != (fs.Range{Off: 10, Len: 5}) {
		t.Fatalf("merged change has dirty %v", c[1].Dirty)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The fsync interval runs from the last fsync recorded, not from a
// close: an editor's fsynced save soon after the file was last closed
// is recorded at once, and only a second fsync within the interval is
// held (and merged with what follows it).
func TestRecorderCloseStartsNoFsyncInterval(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(sink, time.Hour, quiet())
	id := fs.NewFileID()
	r.Changed(fs.Change{Path: "f", ID: id, Size: 1})              // a close
	r.Changed(fs.Change{Path: "f", ID: id, Size: 2, Fsync: true}) // a save, fsynced
	r.Changed(fs.Change{Path: "f", ID: id, Size: 3, Fsync: true}) // held: within the interval
	time.Sleep(50 * time.Millisecond)
	if c := sink.changes(); len(c) != 2 || c[1].Size != 2 {
		t.Fatalf("changes %+v, want the close and the first fsync", c)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := sink.changes(); len(c) != 3 || c[2].Size != 3 {
		t.Fatalf("changes %+v, want the held fsync at the end", c)
	}
}

// A held change whose writer stays open and idle is still recorded: a
// new file fsynced once and kept open (a log, a database), whose writer
// the live tree marks as dirtying again after the fsync, was held until
// its next fsync or close, however late.
func TestRecorderHeldChangeOfAnIdleWriterIsRecorded(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(sink, time.Hour, quiet())
	defer r.Close(context.Background())
	id := fs.NewFileID()
	r.Changed(fs.Change{Path: "log", ID: id, Size: 6, New: true, Fsync: true}) // held: a new file's grace
	r.dirtied(id)                                                              // the writer is still open
	deadline := time.Now().Add(newFileGrace + writerHold + 5*time.Second)
	for len(sink.changes()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c := sink.changes(); len(c) != 1 || c[0].Size != 6 {
		t.Fatalf("changes %+v: the fsynced new file was not recorded while its writer stayed open", c)
	}
}

func TestRecorderCloseReleasesHeldFsync(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(sink, time.Hour, quiet())
	id := fs.NewFileID()
	r.Changed(fs.Change{ID: id, Size: 1, Fsync: true})
	r.Changed(fs.Change{ID: id, Size: 2, Fsync: true}) // held
	r.Changed(fs.Change{ID: id, Size: 3})              // last close: goes at once, with the held one merged
	time.Sleep(50 * time.Millisecond)
	c := sink.changes()
	if len(c) != 2 || c[1].Size != 3 {
		t.Fatalf("changes %+v", c)
	}
	r.Close(context.Background())
}

func TestRecorderIntervalElapses(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(sink, 20*time.Millisecond, quiet())
	defer r.Close(context.Background())
	id := fs.NewFileID()
	r.Changed(fs.Change{ID: id, Size: 1, Fsync: true})
	r.Changed(fs.Change{ID: id, Size: 2, Fsync: true})
	deadline := time.Now().Add(5 * time.Second)
	for len(sink.changes()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if c := sink.changes(); len(c) != 2 || c[1].Size != 2 {
		t.Fatalf("held fsync not recorded after its interval: %+v", c)
	}
}

func TestRecorderAtomicSaveContinues(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(sink, time.Second, quiet())
	orig, tmp := fs.NewFileID(), fs.NewFileID()
	r.Changed(fs.Change{Path: ".notes.swp", ID: tmp, Size: 10, New: true}) // held: new file
	r.Renamed(fs.Rename{From: ".notes.swp", To: "notes", ID: tmp, Replaced: orig})
	r.Sync(context.Background())
	sink.mu.Lock()
	evs := append([]Event(nil), sink.events...)
	sink.mu.Unlock()
	if len(evs) != 2 || evs[0].Change == nil || evs[0].Continues != orig || evs[0].Change.Path != "notes" || evs[1].Rename == nil {
		t.Fatalf("events %+v", evs)
	}
	r.Close(context.Background())
}

func TestMerge(t *testing.T) {
	a := fs.Change{Dirty: []fs.Range{rg(0, 10), rg(100, 10)}, Kept: 500, Size: 500}
	b := fs.Change{Dirty: []fs.Range{rg(5, 10), rg(200, 10)}, Kept: 150, Size: 205, Fsync: true}
	m := merge(a, b)
	want := fs.Change{Dirty: []fs.Range{rg(0, 15), rg(100, 10), rg(200, 5)}, Kept: 150, Size: 205, Fsync: true}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("merge = %+v, want %+v", m, want)
	}
}

func rg(off, n int64) fs.Range { return fs.Range{Off: off, Len: n} }

func TestRecorderWaitFile(t *testing.T) {
	sink := &memSink{delay: 30 * time.Millisecond}
	r := NewRecorder(sink, time.Hour, quiet())
	defer r.Close(context.Background())
	a, b := fs.NewFileID(), fs.NewFileID()
	r.Changed(fs.Change{ID: a, Size: 1, Fsync: true})
	r.Changed(fs.Change{ID: b, Size: 1, Fsync: true})
	if err := r.Wait(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.changes()); n < 1 {
		t.Fatalf("Wait returned before the file's change was recorded (%d recorded)", n)
	}
	r.Changed(fs.Change{ID: a, Size: 2, Fsync: true}) // held: within the interval
	start := time.Now()
	if err := r.Wait(context.Background(), a); err != nil || time.Since(start) > time.Second {
		t.Fatalf("Wait on a held change: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Changed(fs.Change{ID: b, Size: 3})
	if err := r.Wait(ctx, b); err == nil && len(sink.changes()) < 3 {
		t.Fatal("Wait with a cancelled context neither failed nor found the change recorded")
	}
}

// TestRecorderNewFileGraceDoesNotRestart: a new file closed again and again
// is recorded once its first close's grace has passed, not only when the
// closes stop.
func TestRecorderNewFileGraceDoesNotRestart(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(sink, time.Second, quiet())
	defer r.Close(context.Background())
	id := fs.NewFileID()
	stop := time.Now().Add(3 * newFileGrace)
	for size := int64(1); time.Now().Before(stop); size++ {
		r.Changed(fs.Change{ID: id, Size: size, New: true})
		time.Sleep(newFileGrace / 10)
	}
	if n := len(sink.changes()); n == 0 {
		t.Fatalf("a new file closed every %v for %v was never recorded", newFileGrace/10, 3*newFileGrace)
	}
}

// TestRecorderFlushReleasesOneFile: Flush records the held change of the
// file asked about, and waits for it, leaving other held files alone.
func TestRecorderFlushReleasesOneFile(t *testing.T) {
	sink := &memSink{delay: 20 * time.Millisecond}
	r := NewRecorder(sink, time.Hour, quiet())
	defer r.Close(context.Background())
	a, b := fs.NewFileID(), fs.NewFileID()
	r.Changed(fs.Change{Path: "a", ID: a, New: true, Size: 1})   // held: new-file grace
	r.Changed(fs.Change{Path: "b", ID: b, Size: 1, Fsync: true}) // queued
	r.Changed(fs.Change{Path: "b", ID: b, Size: 2, Fsync: true}) // held: fsync interval
	if err := r.Flush(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	got := sink.changes()
	if len(got) != 2 || got[0].Path != "a" && got[1].Path != "a" {
		t.Fatalf("after Flush(a): %+v, want a's change and b's first", got)
	}
	if err := r.Flush(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if got := sink.changes(); len(got) != 3 || got[2].Size != 2 {
		t.Fatalf("after Flush(b): %+v, want b's held fsync recorded", got)
	}
}

// readGateSink signals that it has read each change, then blocks until
// released: a put still running after its read.
type readGateSink struct {
	release chan struct{}
	reads   chan fs.FileID // if not nil, gets each change's file as it is read
}

func (s *readGateSink) Record(_ context.Context, ev Event) error {
	if s.reads != nil && ev.Change != nil {
		s.reads <- ev.Change.ID
	}
	ev.read.readDone()
	<-s.release
	if ev.Change != nil {
		ev.Change.Close()
	}
	return nil
}

// TestRecorderWaitRead: WaitRead returns once the sink has read the
// file's change, while Wait (fsync) still waits for it to be recorded; a
// file with nothing queued does not wait.
func TestRecorderWaitRead(t *testing.T) {
	sink := &readGateSink{release: make(chan struct{})}
	r := NewRecorder(sink, time.Hour, quiet())
	id := fs.NewFileID()
	r.Changed(fs.Change{ID: id, Size: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitRead(ctx, id); err != nil {
		t.Fatalf("WaitRead: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := r.Wait(short, id); err == nil {
		t.Fatal("Wait returned before the change was recorded")
	}
	if err := r.WaitRead(ctx, fs.NewFileID()); err != nil {
		t.Fatalf("WaitRead of a file with nothing queued: %v", err)
	}
	close(sink.release)
	if err := r.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRecorderReleaseRead: a change held back (a new file's grace) is
// released and read before ReleaseRead returns; WaitRead alone would
// return at once, leaving it to be read after the file's name is gone.
func TestRecorderReleaseRead(t *testing.T) {
	sink := &readGateSink{release: make(chan struct{}), reads: make(chan fs.FileID, 4)}
	r := NewRecorder(sink, time.Hour, quiet())
	id := fs.NewFileID()
	r.Changed(fs.Change{ID: id, Size: 1, New: true}) // held: new-file grace
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitRead(ctx, id); err != nil || len(sink.reads) != 0 {
		t.Fatalf("WaitRead of a held change: %v, %d reads (want none: it is held)", err, len(sink.reads))
	}
	if err := r.ReleaseRead(ctx, id); err != nil {
		t.Fatalf("ReleaseRead: %v", err)
	}
	select {
	case got := <-sink.reads:
		if got != id {
			t.Fatalf("read %v, want %v", got, id)
		}
	default:
		t.Fatal("ReleaseRead returned before the held change was read")
	}
	close(sink.release)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRecorderReleaseReadLeavesAWritersHold: a held change whose file a
// writer has started changing again (dirtied) is not released by
// ReleaseRead: it would be read under the writer.
func TestRecorderReleaseReadLeavesAWritersHold(t *testing.T) {
	sink := &readGateSink{release: make(chan struct{}), reads: make(chan fs.FileID, 4)}
	close(sink.release)
	r := NewRecorder(sink, time.Hour, quiet())
	id := fs.NewFileID()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.Changed(fs.Change{ID: id, Size: 1, Fsync: true}) // queued: the first of the interval
	r.Changed(fs.Change{ID: id, Size: 2, Fsync: true}) // held: within the interval
	r.dirtied(id)                                      // its writer goes on
	if err := r.ReleaseRead(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.reads); n != 1 {
		t.Fatalf("%d changes read, want the queued one only", n)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A new file's fsynced change, held for its grace and the interval,
// keeps the grace when its writer closes (an atomic save renames the
// temp file after closing it) but not the interval: it is recorded when
// the grace ends, not an interval later.
func TestRecorderWriterClosedKeepsNewFileGrace(t *testing.T) {
	sink := &memSink{}
	r := NewRecorder(sink, time.Hour, quiet())
	defer r.Close(context.Background())
	id := fs.NewFileID()
	r.Changed(fs.Change{Path: "old", ID: id, Size: 1, Fsync: true}) // an earlier fsync: starts the interval
	for len(sink.changes()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	r.Changed(fs.Change{Path: "new", ID: id, Size: 2, New: true, Fsync: true}) // held: grace and interval
	r.writerClosed(id)
	if !r.holding(id) {
		t.Fatalf("the new file's change was released at its writer's close, in its grace")
	}
	deadline := time.Now().Add(newFileGrace + 5*time.Second)
	for len(sink.changes()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c := sink.changes(); len(c) != 2 || c[1].Size != 2 {
		t.Fatalf("changes %+v: the closed change was held past its grace", c)
	}
}
