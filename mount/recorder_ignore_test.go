package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
)

// seenSink is the store sink behind its lock, noting what it is handed;
// its batches wait until gate is closed.
type seenSink struct {
	*lockedSink
	gate    chan struct{}
	mu      sync.Mutex
	changes int
	others  int
}

func (s *seenSink) RecordBatch(ctx context.Context, evs []Event, done func([]error)) {
	<-s.gate
	s.mu.Lock()
	for _, ev := range evs {
		if ev.Change != nil {
			s.changes++
		} else {
			s.others++
		}
	}
	s.mu.Unlock()
	s.lockedSink.RecordBatch(ctx, evs, done)
}

// TestIgnoredEventsAreNotQueued: git writes each object as a temporary
// file, links it into place and unlinks the temporary name. The store
// sink records nothing for links, for removals of a file that lives on
// (Nlink gathered, 1) and of files that did not move in this mount, so
// the Recorder does not queue them; an unlink whose link count fs did
// not gather (0, as in a mount), once a directory has moved, is queued,
// to name a deleted file's history, and taken in stride by the windows.
// Either way the changes between them are recorded in one window (one
// group commit), and every file gets its revision.
func TestIgnoredEventsAreNotQueued(t *testing.T) {
	for _, nlink := range []uint32{1, 0} {
		t.Run(fmt.Sprint("nlink ", nlink), func(t *testing.T) { testIgnoredEvents(t, nlink) })
	}
}

func testIgnoredEvents(t *testing.T, nlink uint32) {
	dir, st, sink := openTestSink(t)
	sink.log = failOnError(t)
	seen := &seenSink{lockedSink: &lockedSink{sink: sink}, gate: make(chan struct{})}
	r := NewRecorder(seen, time.Second, failOnError(t))
	defer r.Close(context.Background())

	const n = 100
	content := func(i int) []byte { return testutil.Bytes(uint64(i), 200+i*13) }
	ids := make([]fs.FileID, n)
	c0 := storeStats(t, st)
	if nlink == 0 {
		r.Renamed(fs.Rename{From: "d", To: "e", Dir: true})
	}
	for i := range n {
		tmp, obj := filepath.Join(dir, fmt.Sprintf("tmp%d", i)), filepath.Join(dir, fmt.Sprintf("obj%d", i))
		if err := os.WriteFile(tmp, content(i), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(tmp)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = fs.NewFileID()
		size := int64(len(content(i)))
		// not New: a new file's change would be held for its grace
		r.Changed(fs.Change{Path: filepath.Base(tmp), ID: ids[i], Size: size, Dirty: []fs.Range{{Off: 0, Len: size}}, Content: f})
		if err := os.Link(tmp, obj); err != nil {
			t.Fatal(err)
		}
		r.Linked(fs.Link{Path: filepath.Base(obj), Target: filepath.Base(tmp), ID: ids[i]})
		if err := os.Remove(tmp); err != nil {
			t.Fatal(err)
		}
		r.Removed(fs.Remove{Path: filepath.Base(tmp), ID: ids[i], Nlink: nlink})
		r.Renamed(fs.Rename{From: "x", To: "y", ID: fs.NewFileID()}) // over nothing: binds nothing
	}
	close(seen.gate) // the backlog is queued: at most the first change went ahead of it
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen.mu.Lock()
	changes, others := seen.changes, seen.others
	seen.mu.Unlock()
	if want := map[uint32]int{1: 0, 0: n}[nlink]; changes != n || others != want {
		t.Errorf("the sink was handed %d changes and %d other events, want %d and %d", changes, others, n, want)
	}
	c1 := storeStats(t, st)
	puts, commits := c1.Puts-c0.Puts, c1.Commits-c0.Commits
	t.Logf("%d puts in %d group commits", puts, commits)
	if puts != n || commits > 2 {
		t.Errorf("%d puts in %d commits; want %d puts in at most 2 (a window for the backlog)", puts, commits, n)
	}
	for i := range n {
		fid, ok := sink.storeID(ids[i])
		if !ok {
			t.Fatalf("file %d has no store identity", i)
		}
		got, err := st.Get(context.Background(), index.RevID{File: fid, Rev: 0})
		if err != nil || !bytes.Equal(got, content(i)) {
			t.Fatalf("file %d reads back wrong (%v)", i, err)
		}
	}
}

// TestStoreSinkIgnores: what the store sink skips, and what it must see.
func TestStoreSinkIgnores(t *testing.T) {
	_, _, sink := openTestSink(t)
	a, b := fs.NewFileID(), fs.NewFileID()
	for _, c := range []struct {
		ev   Event
		want bool
	}{
		{Event{Remove: &fs.Remove{Path: "a", ID: a}}, true},               // where its last revision was recorded
		{Event{Remove: &fs.Remove{Path: "a", ID: a}, Moved: true}, false}, // names a deleted file's history
		{Event{Remove: &fs.Remove{Path: "a", ID: a, Nlink: 1}, Moved: true}, true},
		{Event{Remove: &fs.Remove{Path: "d", Dir: true}}, true},
		{Event{Remove: &fs.Remove{}}, true}, // IgnoresRemovesAndLinks' probe
		{Event{Link: &fs.Link{Path: "b", Target: "a", ID: a}}, true},
		{Event{Rename: &fs.Rename{From: "a", To: "b", ID: a}}, true},
		{Event{Rename: &fs.Rename{From: "a", To: "b", ID: a, Replaced: b, Exchange: true}}, true},
		{Event{Rename: &fs.Rename{From: "a", To: "b", ID: a, Replaced: b}}, false}, // an atomic save
		{Event{Change: &fs.Change{Path: "a", ID: a}}, false},
		{Event{redo: &redo{id: a}}, false},
	} {
		if got := sink.Ignores(c.ev); got != c.want {
			t.Errorf("Ignores(%+v) = %v, want %v", c.ev, got, c.want)
		}
	}
}

// batchCounter counts the batches it is handed.
type batchCounter struct {
	memSink
	batches atomic.Int32
}

func (b *batchCounter) RecordBatch(ctx context.Context, evs []Event, done func([]error)) {
	b.batches.Add(1)
	for _, ev := range evs {
		_ = b.Record(ctx, ev)
	}
	done(make([]error, len(evs)))
}

// TestRecorderLingersForATrickle: changes arriving a millisecond apart
// with nobody waiting are gathered into a few batches (the sink's syncs
// are per batch), not handed over one by one as they come.
func TestRecorderLingersForATrickle(t *testing.T) {
	sink := &batchCounter{}
	r := NewRecorder(sink, time.Second, quiet())
	defer r.Close(context.Background())
	const n = 10
	for i := range n {
		r.Changed(fs.Change{Path: fmt.Sprint(i), ID: fs.NewFileID(), Size: 1})
		time.Sleep(time.Millisecond)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(sink.changes()); got != n {
		t.Fatalf("%d changes recorded, want %d", got, n)
	}
	if b := sink.batches.Load(); b > n/2 {
		t.Errorf("%d changes 1 ms apart recorded in %d batches, want them gathered (at most %d)", n, b, n/2)
	}
}
