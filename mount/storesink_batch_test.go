package mount

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
)

// TestBatchOfNewFilesSharesCommits: a backlog of new small files (an
// untar) is recorded in windows whose puts share group commits; every
// file gets its one revision with its content, and a file changed twice
// in the backlog gets two revisions, in order.
func TestBatchOfNewFilesSharesCommits(t *testing.T) {
	dir, st, sink := openTestSink(t)
	ls := &lockedSink{sink: sink}

	const n = 200
	content := func(i int) []byte { return testutil.Bytes(uint64(i), 100+i*37) }
	var evs []Event
	ids := make([]fs.FileID, n)
	change := func(i int, c fs.Change) {
		p := filepath.Join(dir, fmt.Sprint(i))
		var err error
		if c.Content, err = os.Open(p); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, Event{Change: &c})
	}
	for i := range n {
		ids[i] = fs.NewFileID()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), content(i), 0o644); err != nil {
			t.Fatal(err)
		}
		size := int64(len(content(i)))
		change(i, fs.Change{Path: fmt.Sprint(i), ID: ids[i], Size: size, New: true, Dirty: []fs.Range{{Off: 0, Len: size}}})
	}
	// file 7 again, written in place: a second revision from its ranges
	edited := bytes.Clone(content(7))
	copy(edited[10:], "edited")
	if err := os.WriteFile(filepath.Join(dir, "7"), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	change(7, fs.Change{Path: "7", ID: ids[7], Size: int64(len(edited)), Kept: int64(len(edited)), Dirty: []fs.Range{{Off: 10, Len: 6}}})
	// file 7's first change is then recorded from the edited file too
	// (the live file is what a recorder reads)
	want := func(i int) []byte {
		if i == 7 {
			return edited
		}
		return content(i)
	}

	c0 := storeStats(t, st)
	var done int
	ls.RecordBatch(context.Background(), evs, func(errs []error) {
		for _, err := range errs {
			if err != nil {
				t.Errorf("recording: %v", err)
			}
		}
		done += len(errs)
	})
	if done != len(evs) {
		t.Fatalf("%d events finished, want %d", done, len(evs))
	}
	c1 := storeStats(t, st)
	puts, commits := c1.Puts-c0.Puts, c1.Commits-c0.Commits
	t.Logf("%d puts in %d group commits", puts, commits)
	// One commit per window: file 7's second change starts a second one.
	if windows := int64((n+maxWindow-1)/maxWindow + 1); puts != n+1 || commits > windows {
		t.Errorf("%d puts in %d commits; want %d puts in at most %d (one per window)", puts, commits, n+1, windows)
	}
	for i := range n {
		fid := sink.ids[ids[i]]
		revs := 1
		if i == 7 {
			revs = 2
		}
		m, err := st.File(fid)
		if err != nil || m.Revs != uint32(revs) {
			t.Fatalf("file %d: %+v (%v), want %d revisions", i, m, err, revs)
		}
		got, err := st.Get(context.Background(), index.RevID{File: fid, Rev: index.Rev(revs - 1)})
		if err != nil || !bytes.Equal(got, want(i)) {
			t.Fatalf("file %d reads back wrong (%v)", i, err)
		}
	}
}

// batchGate holds a BatchSink's batches until opened.
type batchGate struct {
	BatchSink
	gate chan struct{}
}

func (g *batchGate) RecordBatch(ctx context.Context, evs []Event, done func([]error)) {
	<-g.gate
	g.BatchSink.RecordBatch(ctx, evs, done)
}

// TestJournalCleanPastDescriptorCap: a backlog larger than fs's cap on
// descriptors held by pending changes is recorded in batches, every file
// gets its revision, and the pending journal forgets each once recorded.
func TestJournalCleanPastDescriptorCap(t *testing.T) {
	g := &batchGate{gate: make(chan struct{})}
	var jnl *journal
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := startWith(t, Config{Store: store, testRecorder: func(r *Recorder) {
		js := r.sink.(journalSink)
		jnl, g.BatchSink = js.j, js
		r.sink = g
	}})
	const n = 700
	for i := range n {
		if err := os.WriteFile(filepath.Join(l.mnt, fmt.Sprint(i)), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l.reported(t, n)
	close(g.gate)
	l.recorded(t, n)
	if left := jnl.entries(); len(left) != 0 {
		t.Errorf("%d files still pending in the journal after their changes were recorded", len(left))
	}
	l.stop(t)
	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if s := storeStats(t, st); s.Revisions != n {
		t.Fatalf("%d revisions, want %d", s.Revisions, n)
	}
}

// BenchmarkRecordNewFiles: a backlog of new 4 KiB files (an untar)
// recorded by the sink in windows: the store's group commits and the
// fsyncs of live.ids (one per window) per file.
func BenchmarkRecordNewFiles(b *testing.B) {
	dir, _, sink := openTestSink(b)
	ls := &lockedSink{sink: sink}
	evs := make([]Event, b.N)
	for i := range evs {
		p := filepath.Join(dir, fmt.Sprint(i))
		data := testutil.Bytes(uint64(i), 4096)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
		c := fs.Change{Path: fmt.Sprint(i), ID: fs.NewFileID(), Size: int64(len(data)), New: true}
		var err error
		if c.Content, err = os.Open(p); err != nil {
			b.Fatal(err)
		}
		evs[i] = Event{Change: &c}
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	ls.RecordBatch(context.Background(), evs, func(errs []error) {
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// In-place changes of a window are recorded from their written ranges
// (delta-only puts) and, like fulltext puts, share one group commit per
// window, whatever number of goroutines the window's jobs run on.
func TestBatchOfInPlaceChangesSharesCommits(t *testing.T) {
	dir, st, sink := openTestSink(t)
	ls := &lockedSink{sink: sink}
	const n = 200
	content := func(i int) []byte { return testutil.Bytes(uint64(i), 4000+i) }
	ids := make([]fs.FileID, n)
	record := func(change func(i int) fs.Change) objstore.Stats {
		t.Helper()
		var evs []Event
		for i := range n {
			c := change(i)
			var err error
			if c.Content, err = os.Open(filepath.Join(dir, fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, Event{Change: &c})
		}
		c0 := storeStats(t, st)
		ls.RecordBatch(context.Background(), evs, func(errs []error) {
			for _, err := range errs {
				if err != nil {
					t.Errorf("recording: %v", err)
				}
			}
		})
		c1 := storeStats(t, st)
		c1.Puts, c1.Commits = c1.Puts-c0.Puts, c1.Commits-c0.Commits
		return c1
	}
	for i := range n {
		ids[i] = fs.NewFileID()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), content(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	record(func(i int) fs.Change {
		size := int64(len(content(i)))
		return fs.Change{Path: fmt.Sprint(i), ID: ids[i], Size: size, New: true, Dirty: []fs.Range{{Off: 0, Len: size}}}
	})
	edited := func(i int) []byte {
		b := bytes.Clone(content(i))
		copy(b[100:], "edited in place")
		return b
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), edited(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read0 := sink.liveRead.Load()
	d := record(func(i int) fs.Change {
		size := int64(len(content(i)))
		return fs.Change{Path: fmt.Sprint(i), ID: ids[i], Size: size, Kept: size, Dirty: []fs.Range{{Off: 100, Len: 15}}}
	})
	if read := sink.liveRead.Load() - read0; read > n*15 {
		t.Errorf("read %d bytes of live files for %d in-place changes of 15 bytes: not recorded from their ranges", read, n)
	}
	if windows := int64((n + maxWindow - 1) / maxWindow); d.Puts != n || d.Commits > windows {
		t.Errorf("%d puts in %d commits; want %d puts in at most %d (one per window)", d.Puts, d.Commits, n, windows)
	}
	for i := range n {
		got, err := st.Get(context.Background(), index.RevID{File: sink.ids[ids[i]], Rev: 1})
		if err != nil || !bytes.Equal(got, edited(i)) {
			t.Fatalf("file %d reads back wrong (%v)", i, err)
		}
	}
}

// BenchmarkRecordSmallNewFiles: what recording costs per file of an
// untar as the mount records it: small new text files whose content the
// live tree read at their release (fs.Change.Data), a store opened as
// the mount opens it (fast fulltexts), the pending journal kept in step,
// windows of maxWindow.
func BenchmarkRecordSmallNewFiles(b *testing.B) {
	dir := b.TempDir()
	st, err := objstore.Open(filepath.Join(dir, "s.dfs"), objstore.Config{Create: true, FastFulltexts: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	sink, err := openStoreSink(st, filepath.Join(dir, idsFile), quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	jnl, err := openJournal(filepath.Join(dir, journalFile), quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer jnl.close()
	js := journalSink{ls: &lockedSink{sink: sink}, j: jnl}
	evs := make([]Event, b.N)
	var total int64
	for i := range evs {
		data := sourceText(uint64(i))
		c := fs.Change{Path: fmt.Sprintf("pkg%02d/file%d.go", i%25, i), ID: fs.NewFileID(), Size: int64(len(data)), New: true,
			Data: data, DataTime: time.Now(), Report: uint64(i + 1)}
		jnl.dirtied(c.ID, c.Path, fs.FileID{})
		jnl.reported(&c)
		evs[i], total = Event{Change: &c}, total+int64(len(data))
	}
	b.SetBytes(total / int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	js.RecordBatch(context.Background(), evs, func(errs []error) {
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// sourceText returns text that compresses about as source code does (2x
// at zstd's fastest level on a few KiB), of 200 B to 16 KiB, most small
// (M3's sizes), depending only on seed.
func sourceText(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	n := 200 + int(r.Float64()*r.Float64()*16000)
	words := []string{"func", "return", "if", "err", "!=", "nil", "{", "}", "for", "range", ":=", "the", "of", "int", "string"}
	var b []byte
	for len(b) < n {
		if r.IntN(3) == 0 {
			b = append(b, words[r.IntN(len(words))]...)
		} else {
			for range 2 + r.IntN(8) {
				b = append(b, byte('a'+r.IntN(26)))
			}
		}
		b = append(b, " \n"[r.IntN(2)])
	}
	return b[:n]
}

// threadNice returns the nice value of the calling thread.
func threadNice(t *testing.T) int {
	t.Helper()
	// The raw getpriority(2) returns 20 - nice, which syscall passes on.
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	return 20 - p
}

// TestLowPriorityWindows: a window's jobs run at backgroundNice while
// their yield says so, those after it stops saying so at the normal
// priority, and the threads they ran on do not carry the lower priority
// to anything else (later jobs, the caller).
func TestLowPriorityWindows(t *testing.T) {
	base := threadNice(t)
	low := min(base+backgroundNice, 19)
	jobs := make([]*job, 64)
	for i := range jobs {
		jobs[i] = &job{}
	}
	var mu sync.Mutex
	var seen []int // nice value of each job, in the order they ran
	note := func(*job) {
		n := threadNice(t)
		mu.Lock()
		seen = append(seen, n)
		mu.Unlock()
	}
	count := func(n int) (c int) {
		for _, v := range seen {
			if v == n {
				c++
			}
		}
		return c
	}
	always := func() bool { return true }
	for range 20 {
		each(jobs, always, note)
	}
	if count(low) != 20*len(jobs) {
		t.Fatalf("low-priority jobs ran at nice values %v, want all at %d", seen, low)
	}
	seen = nil
	for range 20 {
		each(jobs, nil, note)
	}
	if count(base) != 20*len(jobs) {
		t.Fatalf("jobs after the low-priority windows ran at nice values %v, want all at %d", seen, base)
	}
	// A waiter comes after the tenth job has started: at most one job
	// per worker runs at the lower priority after that.
	seen = nil
	var started int
	waiterAfter := func() bool {
		mu.Lock()
		defer mu.Unlock()
		started++
		return started <= 10
	}
	each(jobs, waiterAfter, note)
	if n := count(low); n == 0 || n > 10+recordWorkers() || count(base) != len(jobs)-n {
		t.Fatalf("a waiter after 10 jobs: %d jobs at nice %d, %d at %d (of %d); want 1 to %d at the lower priority, the rest at the normal", n, low, count(base), base, len(jobs), 10+recordWorkers())
	}
	if n := threadNice(t); n != base {
		t.Fatalf("caller's thread at nice %d after the windows, was %d", n, base)
	}
}

// TestBackground: only a window of minBackground small new files or
// more, read at their release, is put at the lower priority, and only
// while nobody waits.
func TestBackground(t *testing.T) {
	small := &job{c: &fs.Change{Data: []byte("x")}}
	reopened := &job{c: &fs.Change{}}
	window := func(n int, more ...*job) []*job {
		js := []*job{nil} // a change that failed to stage
		for range n {
			js = append(js, small)
		}
		return append(js, more...)
	}
	waits := false
	s := &storeSink{waited: func() bool { return waits }}
	yield := s.background(window(minBackground))
	if yield == nil || !yield() {
		t.Fatal("a window of small new files, nobody waiting: not put at the lower priority")
	}
	if waits = true; yield() {
		t.Fatal("a window of small new files still yields once someone waits")
	}
	if s.background(window(minBackground-1)) != nil {
		t.Fatalf("a window of %d small new files yields: fewer than minBackground", minBackground-1)
	}
	if s.background(window(minBackground, reopened)) != nil {
		t.Fatal("a window with a file reopened for its put yields")
	}
	if (&storeSink{}).background(window(minBackground)) != nil {
		t.Fatal("a sink whose Recorder does not say who waits yields")
	}
}

// TestEachRunsEveryJobOnce: each runs every job of a window exactly once
// and skips the nil ones (changes that failed to stage), with one worker
// or several, at either priority, and when a waiter comes in the middle.
func TestEachRunsEveryJobOnce(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		prev := runtime.GOMAXPROCS(procs)
		for _, yield := range []func() bool{nil, func() bool { return true }, periodic(7)} {
			jobs := make([]*job, 300)
			runs := map[*job]*atomic.Int32{}
			for i := range jobs {
				if i%5 != 3 {
					jobs[i] = &job{}
					runs[jobs[i]] = &atomic.Int32{}
				}
			}
			each(jobs, yield, func(j *job) {
				if j == nil {
					t.Error("ran a nil job")
					return
				}
				runs[j].Add(1)
			})
			for i, j := range jobs {
				if j != nil && runs[j].Load() != 1 {
					t.Fatalf("GOMAXPROCS %d: job %d ran %d times", procs, i, runs[j].Load())
				}
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// periodic returns a yield that says no every nth call, as a waiter
// coming and going does.
func periodic(n int) func() bool {
	var calls atomic.Int64
	return func() bool { return calls.Add(1)%int64(n) != 0 }
}
