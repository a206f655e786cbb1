package mount

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
)

// Recording many small files (an untar, a checkout) costs the store one
// group commit (an fsync of the segments and a synced index write) per
// Put when the puts come one at a time. So the sink records a window of
// queued changes of distinct files at once, each in its own goroutine:
// their new store files share index commits, their id records one fsync
// of live.ids, and their puts are all appended before the first waits,
// so that one group commit holds the window (job.durable).
const (
	// maxWindow bounds the changes recorded at once. The syncs of a
	// window cost the same whatever its size, and a window of small files
	// takes tens of milliseconds of CPU, so a snapshot waiting for the
	// sink's lock waits for little. Measured (10,000 files untarred, a
	// loaded 2-core machine): 32 left the recording of an untar some
	// 30-60 s behind it, mostly waiting for syncs.
	maxWindow = 256
	// maxWindowBytes bounds the live bytes a window reads into memory
	// at once; a larger change is recorded alone.
	maxWindowBytes = 32 << 20
)

// BatchSink is a Sink that records a run of queued events together.
type BatchSink interface {
	Sink
	// RecordBatch records evs in order, calling done as they finish with
	// the error of each event finished (from the start of what is left).
	RecordBatch(ctx context.Context, evs []Event, done func(errs []error))
}

// RecordBatch implements BatchSink: one window at a time, each under the
// lock, so that snapshots interleave between windows.
func (l *lockedSink) RecordBatch(ctx context.Context, evs []Event, done func([]error)) {
	for len(evs) > 0 {
		l.mu.Lock()
		errs := l.sink.recordWindow(ctx, evs)
		l.mu.Unlock()
		done(errs)
		evs = evs[len(errs):]
	}
}

// batchable reports whether ev may be recorded together with others: a
// change that continues no other file's history and copies from none
// (those read the sink's maps for other files) and is small enough.
func batchable(ev Event) bool {
	c := ev.Change
	return c != nil && ev.Continues.IsZero() && len(c.Sources) == 0 && c.Size <= maxWindowBytes
}

// recordWindow records a window of events from the start of evs and
// returns the error of each event it took (at least one).
func (s *storeSink) recordWindow(ctx context.Context, evs []Event) []error {
	if !batchable(evs[0]) && evs[0].Remove == nil {
		return []error{s.Record(ctx, evs[0])}
	}
	jobs, errs := s.stageWindow(evs)
	each(jobs, nil, s.open)
	s.newFiles(jobs) // one index transaction for the window's new files
	s.bindNew(jobs)  // one fsync of the ids file for the window
	each(jobs, s.background(jobs), func(j *job) { s.put(ctx, j) })
	for i, j := range jobs {
		if j != nil {
			j.durable() // the first leads one group commit for the window
			errs[i] = s.finish(j)
			j.c.Close()
		}
	}
	return errs
}

// each calls fn on every job, on at most recordWorkers goroutines at a
// time. While yield (if not nil) says so, they run at a lower CPU
// priority (see background): a goroutine that finds it no longer does
// after a job hands the rest to one at the normal priority.
//
// The goroutines take the jobs in order by a shared counter, not from a
// channel: handing each job over a channel woke the worker once per job
// (twice per file of a window: its open, its put), a scheduler round
// trip that an untar of 10,000 files paid 20,000 times.
func each(jobs []*job, yield func() bool, fn func(*job)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var work func(low bool)
	work = func(low bool) {
		defer wg.Done()
		if low {
			lowerPriority()
		}
		for i := next.Add(1) - 1; i < int64(len(jobs)); i = next.Add(1) - 1 {
			if jobs[i] == nil {
				continue
			}
			fn(jobs[i])
			if low && !yield() {
				wg.Add(1)
				go work(false)
				return
			}
		}
	}
	low := yield != nil && yield()
	for range min(recordWorkers(), len(jobs)) {
		wg.Add(1)
		go work(low)
	}
	wg.Wait()
}

// recordWorkers is how many jobs of a window run at once: one core fewer
// than Go runs goroutines on (at least one), so that the requests of the
// file system, whose goroutines come back from reading /dev/fuse wanting
// a core, do not queue behind compression. With every core compressing,
// an untar of 10,000 files took 1.6x the loopback's wall time for 1.5x
// its CPU.
func recordWorkers() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// Recording a backlog of small new files (an untar, git writing its
// objects) runs while the file system serves the program making them,
// on the same cores: the requests, one round trip after another, wait
// whenever a core is compressing. So a window made only of files read
// at their release (fs.Change.Data: 64 KiB or less) puts them, while
// nobody waits for the recording (no fsync, snapshot, history view,
// writable reopen or unmount), on threads of lower priority (nice
// backgroundNice): the kernel then runs the requests (and the program)
// first, and the recording takes the CPU they leave. Once a waiter
// comes, the rest of the window runs at the normal priority, from the
// next job on. Measured (M3's untar of 10,000 files into a fresh mount,
// 3 paired runs each, load 12-15): 8.42 -> 7.40 s median wall
// (everything on threads of lowered priority) and, with this rule,
// 7.17 -> 6.44 s; the snapshot right after it waited 0.2-0.7 s longer
// for what was left to record.
const backgroundNice = 10

// minBackground is the fewest puts a window runs at the lower priority:
// a thread of its own costs ~80 us to make and end (measured: each of
// one job, 78 us against 1 us), as much as recording three small files,
// so a trickle of changes (a window of a few) is not worth it; a
// backlog is.
const minBackground = 16

// background returns the yield of the window jobs's puts (see each):
// nil, the normal priority, unless the window has minBackground jobs or
// more and every job records a small file read at its release; then
// whether nobody waits for the recording.
func (s *storeSink) background(jobs []*job) func() bool {
	if s.waited == nil {
		return nil
	}
	n := 0
	for _, j := range jobs {
		if j != nil && j.c.Data == nil {
			return nil
		}
		if j != nil {
			n++
		}
	}
	if n < minBackground {
		return nil
	}
	return func() bool { return !s.waited() }
}

// lowerPriority gives the calling goroutine a thread of its own at
// backgroundNice (Linux sets the nice value of one thread), for as long
// as it runs: the thread ends with it, as it never unlocks it (raising
// the priority back needs a privilege).
func lowerPriority() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), backgroundNice)
}

// stageWindow stages the longest run of batchable changes (and removals,
// recorded at once: see Record) from the start of evs whose files are
// distinct (by live identity and by store file),
// within maxWindow and maxWindowBytes. jobs[i] is nil for an event that
// failed to stage (errs[i] says why).
func (s *storeSink) stageWindow(evs []Event) (jobs []*job, errs []error) {
	files := map[index.FileID]bool{}
	keys := map[fs.FileID]bool{}
	var bytes int64
	for _, ev := range evs {
		if ev.Remove != nil {
			// Taken in stride (a look at a record): git unlinks the temp name of every object
			// it writes, and windows cut there would cost a commit each;
			// an rm -rf's are recorded a window at a time.
			jobs, errs = append(jobs, nil), append(errs, s.Record(context.Background(), ev))
			continue
		}
		if !batchable(ev) {
			break
		}
		c := ev.Change
		k := key(c)
		if len(jobs) == maxWindow || keys[k] || len(jobs) > 0 && bytes+c.Size > maxWindowBytes {
			break
		}
		if fid := s.ids[c.ID]; !c.ID.IsZero() && fid != 0 && files[fid] {
			break // two live files sharing one history: record in order
		}
		j, err := s.stage(c, ev.Continues)
		if err != nil { // not recordable: reported, and the change is done
			c.Close()
			ev.read.readDone()
		} else {
			j.read = ev.read
			files[j.fid], keys[k] = j.fid != 0, true
			bytes += c.Size
		}
		jobs, errs = append(jobs, j), append(errs, err)
	}
	return jobs, errs
}
