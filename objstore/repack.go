package objstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/klauspost/compress/zstd"
)

// Repack rewrites how every revision of the store in dir is stored, offline:
// it chooses each revision's base again among a wider window of candidates
// than a put can afford, enforces the caps given (cutting chains that
// exceed them) and writes the result into new segments, then switches to
// them. RevIDs, parents, contents and hashes never change: only the base,
// the kind, the chain facts and the record's place do, so anything that
// names a revision (a snapshot, a live file) still names the same bytes.
//
// It takes the store lock itself, so it refuses a mounted store with a
// *LockError naming the holder.
//
// Crash safety (see repack_shadow.go): new records and their entries go to
// a shadow store in dir/repack/ until every revision is done; only then is
// dir/repack/SWITCH written and the entries copied into the live index and
// the segment directories swapped, a roll-forward that Open completes if it
// finds the marker. Until then the live store is untouched, and an
// interrupted repack resumes from the shadow's committed progress.
func Repack(ctx context.Context, dir string, opt RepackOptions) (RepackReport, error) {
	start := time.Now()
	opt = opt.withDefaults()
	if err := checkStore(dir); err != nil {
		return RepackReport{}, err
	}
	lock, err := acquireLock(dir, "repack")
	if err != nil {
		return RepackReport{}, err
	}
	defer lock.release()
	if err := recoverRepack(dir, opt.Logger); err != nil {
		return RepackReport{}, err
	}
	rep, err := repackLocked(ctx, dir, opt, lock)
	rep.Duration = time.Since(start)
	return rep, withSalvageHint(err)
}

// repackLocked repacks the store in dir, whose lock the caller holds and
// whose interrupted switch it has completed (Repack, GC).
func repackLocked(ctx context.Context, dir string, opt RepackOptions, lock *storeLock) (RepackReport, error) {
	start := time.Now()
	if opt.MemoryLimit > 0 {
		// A soft limit makes the collector work harder near it rather than
		// let garbage texts push the process past it.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(opt.MemoryLimit))
	}
	rp, err := newRepacker(ctx, dir, opt, lock)
	if err != nil {
		return RepackReport{}, err
	}
	var rep RepackReport
	whole, err := rp.planSegments(ctx, &rep)
	if err == nil && !whole {
		rp.shadow, err = openShadow(dir, opt, rp.kept)
		err = dropFailedShadow(ctx, dir, opt.Logger, err)
	}
	if err != nil || whole {
		rp.live.closeKeepLock()
		rep.Duration = time.Since(start)
		rep.PeakRSS = peakRSS()
		return rep, err
	}
	rep, err = rp.run(ctx)
	err = dropFailedShadow(ctx, dir, opt.Logger, err)
	rep.Duration = time.Since(start)
	rep.PeakRSS = peakRSS()
	return rep, err
}

// Reuse says whether Repack may keep existing deltas verbatim.
type Reuse uint8

const (
	ReuseAuto  Reuse = iota // keep a delta that meets the caps unless a candidate is clearly better
	ReuseNever              // recompute every revision
)

// ParseReuse parses "auto" or "never".
func ParseReuse(s string) (Reuse, error) {
	switch s {
	case "auto":
		return ReuseAuto, nil
	case "never":
		return ReuseNever, nil
	}
	return 0, fmt.Errorf("reuse %q: want auto or never", s)
}

func (r Reuse) String() string {
	if r == ReuseNever {
		return "never"
	}
	return "auto"
}

// RepackOptions tune Repack. The zero value gives the defaults.
type RepackOptions struct {
	Window       int     // nearest earlier revisions of a file tried as bases; default DefaultRepackWindow
	MaxChain     uint32  // chain length cap; default DefaultMaxChainLen
	MaxReadRatio float64 // chain read cap as a multiple of the text; default DefaultMaxReadRatio
	Reuse        Reuse
	Jobs         int // files repacked at once, and candidate deltas computed at once per revision; default GOMAXPROCS
	// MemoryLimit bounds, in bytes, the fulltexts repack holds: the window's
	// texts, the target, its candidate bases and the rebuild buffers, all of
	// them at most the largest file's size. Repack shrinks the window and
	// the number of jobs to fit, and clears its text cache when the heap
	// nears the limit; badger and zstd add a fixed ~100 MiB it does not
	// count. 0: half the machine's memory.
	MemoryLimit int64
	Progress    func(RepackProgress) // called after every revision; may be nil
	Logger      *slog.Logger
	SegmentSize int64 // new segments roll past this; default DefaultSegmentSize

	keep        *gcPlan                 // gc: the revisions kept; nil keeps all
	commitEvery int                     // revisions per shadow commit (tests make it small)
	stopAt      func(step string) error // test hook: end the switch after a step, as a crash would
	noWhole     bool                    // test hook: never leave the store as it is (see repack_plan.go)
	keepAll     bool                    // test hook: keep every segment whole, whatever the plan says
	salvage     bool                    // Salvage's rewrite: a damaged store is not refused
}

const (
	// DefaultRepackWindow: git's pack-objects default window. Candidates
	// further back in a file's history rarely win: each revision between
	// adds its own edits to the delta.
	DefaultRepackWindow = 10
	// repackCommitEvery bounds the revisions committed to the shadow per
	// transaction (badger caps a transaction's size) and the work an
	// interruption loses.
	repackCommitEvery = 256
	// repackCommitBytes also commits after this many bytes of new records,
	// so an interruption loses at most a few seconds of large revisions.
	repackCommitBytes = 64 << 20
)

func (o RepackOptions) withDefaults() RepackOptions {
	if o.Window <= 0 {
		o.Window = DefaultRepackWindow
	}
	if o.MaxChain == 0 {
		o.MaxChain = DefaultMaxChainLen
	}
	if o.MaxReadRatio <= 0 {
		o.MaxReadRatio = DefaultMaxReadRatio
	}
	if o.Jobs <= 0 {
		o.Jobs = runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.MemoryLimit <= 0 {
		o.MemoryLimit = totalMemory() / 2
	}
	if o.commitEvery <= 0 {
		o.commitEvery = repackCommitEvery
	}
	return o
}

func (o RepackOptions) caps() Caps {
	return Caps{MaxChainLen: o.MaxChain, MaxReadRatio: o.MaxReadRatio, MinReadBytes: DefaultMinReadBytes,
		MaxHeldRatio: DefaultMaxHeldRatio}
}

// RepackProgress is what Repack reports after each revision.
type RepackProgress struct {
	Revisions  int64         // total revisions in the store
	Done       int64         // revisions done, including those resumed
	Committed  int64         // revisions durable in the shadow store
	TotalBytes uint64        // sum of fulltext lengths in the store
	Bytes      uint64        // fulltext bytes of the revisions done
	Elapsed    time.Duration // since this run started
}

// RepackReport summarises a repack. Counts are of this run; revisions an
// interrupted run already did are counted in ResumedRevisions.
type RepackReport struct {
	Files            int64         `json:"files"`
	Revisions        int64         `json:"revisions"`
	SizeBefore       uint64        `json:"size_before"` // segment bytes on disk
	SizeAfter        uint64        `json:"size_after"`
	StoredBefore     uint64        `json:"stored_before"` // sum of record lengths
	StoredAfter      uint64        `json:"stored_after"`
	Redeltaed        int64         `json:"redeltaed"` // base chosen again and record written anew
	Reused           int64         `json:"reused"`    // existing delta record copied verbatim
	Unchanged        int64         `json:"unchanged"` // fulltexts kept as they were, and dedups
	Whole            bool          `json:"whole"`     // nothing to change: the store was left as it is (see repack_plan.go)
	Resumed          bool          `json:"resumed"`
	ResumedRevisions int64         `json:"resumed_revisions"`
	ChainMaxBefore   uint32        `json:"chain_max_before"`
	ChainMaxAfter    uint32        `json:"chain_max_after"`
	ChainMeanBefore  float64       `json:"chain_mean_before"`
	ChainMeanAfter   float64       `json:"chain_mean_after"`
	Window           int           `json:"window"` // in effect, after the memory limit
	Jobs             int           `json:"jobs"`
	Duration         time.Duration `json:"duration_ns"`
	PeakRSS          int64         `json:"peak_rss"` // bytes, getrusage of the process
}

// repacker is one run of Repack.
type repacker struct {
	dir     string
	opt     RepackOptions
	caps    Caps
	lock    *storeLock
	live    *Store // the store as it is; read only
	shadow  *Store // dir/repack: the new entries and segments
	window  int
	similar *similarFiles   // built before the jobs start, read-only after
	kept    map[uint32]bool // live segments kept whole (repack_keep.go); read-only
	salv    *salvagePlan    // Salvage's plan; nil for a repack or gc
	// fileDone is closed when a file's job ends (see doneEntry); written
	// before the jobs start, read-only after.
	fileDone map[index.FileID]chan struct{}

	total, totalBytes            int64
	done, committed, doneBytes   atomic.Int64
	redeltaed, reused, unchanged atomic.Int64
	uncommitted                  atomic.Int64  // revisions appended to the shadow since its last commit
	unwritten                    atomic.Uint64 // and their record bytes
	started                      time.Time
	progressMu                   sync.Mutex
}

func newRepacker(ctx context.Context, dir string, opt RepackOptions, lock *storeLock) (*repacker, error) {
	rp := &repacker{dir: dir, opt: opt, caps: opt.caps(), lock: lock, started: time.Now()}
	live, err := openLocked(dir, rp.liveConfig(DefaultCacheBytes), lock, false)
	if err != nil {
		return nil, err
	}
	if err := live.Damage(); err != nil && !opt.salvage {
		live.closeKeepLock()
		return nil, fmt.Errorf("objstore: repack: refused: %w; %s", err, salvageHint)
	}
	rp.live = live
	// Hold rows a build without them left stale are rebuilt here, where
	// the store is already read whole offline (index/holds.go).
	if err := live.idx.RebuildHolds(ctx); err != nil {
		live.closeKeepLock()
		return nil, fmt.Errorf("objstore: repack: %w", err)
	}
	if err := rp.parallelEncoders(); err != nil {
		live.closeKeepLock()
		return nil, err
	}
	maxSize, err := rp.largestText(ctx)
	if err == nil {
		rp.fitMemory(maxSize)
		rp.live.cache = newLRU[index.RevID](rp.cacheBudget(maxSize))
	}
	if err != nil {
		live.closeKeepLock()
		return nil, err
	}
	return rp, nil
}

func (rp *repacker) liveConfig(cache int64) Config {
	return Config{Logger: rp.opt.Logger, CacheBytes: cache, LatestBytes: 1,
		MaxChainLen: rp.opt.MaxChain, MaxReadRatio: rp.opt.MaxReadRatio, SegmentSize: rp.opt.SegmentSize}.withDefaults()
}

// parallelEncoders gives the live store's delta encoders one block
// encoder per job: the store's run one block at a time (its puts are
// serialised anyway), which would queue every job's deltas behind one.
// Same levels and windows as the store's (see newEncoder).
func (rp *repacker) parallelEncoders() error {
	mk := func(l zstd.EncoderLevel, window int) (*zstd.Encoder, error) {
		opts := []zstd.EOption{zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(rp.opt.Jobs),
			zstd.WithLowerEncoderMem(true), zstd.WithEncoderCRC(false)}
		if window > 0 {
			opts = append(opts, zstd.WithWindowSize(window))
		}
		return zstd.NewWriter(nil, opts...)
	}
	enc, err := mk(zstd.SpeedDefault, 0)
	if err != nil {
		return fmt.Errorf("objstore: zstd: %w", err)
	}
	senc, err := mk(zstd.SpeedBetterCompression, 2*smallDelta)
	if err != nil {
		enc.Close()
		return fmt.Errorf("objstore: zstd: %w", err)
	}
	rp.live.enc.Close()
	rp.live.senc.Close()
	rp.live.enc, rp.live.senc = enc, senc
	return nil
}

// textsPerJob is what one job holds besides its window: the target, the
// base being encoded against and the two rebuild buffers of a chain.
const textsPerJob = 4

// fitMemory shrinks the jobs, then the window, until the texts they hold
// fit the memory limit.
func (rp *repacker) fitMemory(maxSize uint64) {
	rp.window = rp.opt.Window
	if rp.opt.MemoryLimit <= 0 || maxSize == 0 {
		return
	}
	texts := uint64(rp.opt.MemoryLimit) / maxSize // texts that fit
	jobs := uint64(rp.opt.Jobs)
	for jobs > 1 && texts < jobs*(textsPerJob+1) {
		jobs--
	}
	rp.opt.Jobs = int(jobs)
	per := texts / jobs
	rp.window = max(1, min(rp.opt.Window, int(per)-textsPerJob))
	if per < textsPerJob+1 {
		rp.opt.Logger.Warn("memory limit below one job's texts; using window 1", "limit", rp.opt.MemoryLimit, "largest", maxSize)
	}
}

// cacheBudget holds every job's window of texts, so that trying the window
// never rebuilds a text twice.
func (rp *repacker) cacheBudget(maxSize uint64) int64 {
	n := int64(maxSize) * int64(rp.window+1) * int64(rp.opt.Jobs)
	return max(n, 16<<20)
}

// largestText walks the index for the largest fulltext and the totals.
func (rp *repacker) largestText(ctx context.Context) (uint64, error) {
	var maxSize uint64
	err := rp.live.idx.All(ctx, func(e index.Entry) error {
		maxSize = max(maxSize, e.Size)
		rp.total++
		rp.totalBytes += int64(e.Size)
		return nil
	})
	return maxSize, err
}

type fileJob struct {
	id   index.FileID
	meta index.FileMeta
}

// run repacks every file into the shadow, then switches.
func (rp *repacker) run(ctx context.Context) (RepackReport, error) {
	rep, err := rp.begin(ctx)
	if err == nil {
		err = rp.repackFiles(ctx, &rep)
	}
	if err == nil && rp.opt.keep != nil {
		err = rp.checkKept(ctx)
	}
	if err == nil {
		err = freshTail(rp.shadow)
	}
	if err == nil {
		err = linkKept(rp.dir, rp.kept)
	}
	if err == nil {
		err = writeSwitch(rp.dir)
	}
	if err == nil && rp.opt.stopAt != nil {
		err = rp.opt.stopAt("marked")
	}
	cerr := errors.Join(rp.shadow.closeKeepLock(), rp.live.closeKeepLock())
	if err != nil {
		return rep, err
	}
	if cerr != nil {
		return rep, cerr
	}
	if err := finishSwitch(rp.dir, rp.opt.Logger, rp.opt.stopAt); err != nil {
		return rep, err
	}
	return rep, rp.after(ctx, &rep)
}

// begin fills in the report's "before" half and the resumed progress.
func (rp *repacker) begin(ctx context.Context) (RepackReport, error) {
	st, err := rp.live.Stats(ctx)
	if err != nil {
		return RepackReport{}, err
	}
	rep := RepackReport{Files: st.Files, Revisions: st.Revisions, SizeBefore: st.SegmentBytes,
		StoredBefore: st.StoredBytes, ChainMaxBefore: st.ChainMax, ChainMeanBefore: st.ChainMean,
		Window: rp.window, Jobs: rp.opt.Jobs}
	// The live revisions below each shadow record's count are done
	// (kept, or left out by this gc); not the count itself, since an
	// earlier gc may have left gaps there.
	err = rp.shadow.idx.Files(ctx, func(f index.FileID, m index.FileMeta) error {
		return rp.live.idx.Revisions(ctx, f, func(e index.Entry) error {
			if uint32(e.Rev) < m.Revs {
				rep.ResumedRevisions++
			}
			return nil
		})
	})
	rep.Resumed = rep.ResumedRevisions > 0
	if rep.Resumed { // progress counts the bytes done before, too
		err = errors.Join(err, rp.shadow.idx.All(ctx, func(e index.Entry) error {
			rp.doneBytes.Add(int64(e.Size))
			return nil
		}))
	}
	rp.done.Store(rep.ResumedRevisions)
	rp.committed.Store(rep.ResumedRevisions)
	return rep, err
}

// repackFiles runs the jobs over every file.
func (rp *repacker) repackFiles(ctx context.Context, rep *RepackReport) error {
	var jobs []fileJob
	err := rp.live.idx.Files(ctx, func(f index.FileID, m index.FileMeta) error {
		jobs = append(jobs, fileJob{f, m})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(jobs, func(a, b fileJob) int { return cmp.Compare(a.id, b.id) }) // doneEntry waits on lower ids only
	if rp.similar, err = rp.similarTable(jobs); err != nil {
		return err
	}
	rp.fileDone = make(map[index.FileID]chan struct{}, len(jobs))
	for _, j := range jobs {
		rp.fileDone[j.id] = make(chan struct{})
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan fileJob)
	var wg sync.WaitGroup
	for range rp.opt.Jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if err := rp.repackFile(ctx, j); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for _, j := range jobs {
		select {
		case ch <- j:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
	if context.Cause(ctx) == nil {
		if err := rp.commitRest(); err != nil {
			return err
		}
	}
	rep.Redeltaed, rep.Reused, rep.Unchanged = rp.redeltaed.Load(), rp.reused.Load(), rp.unchanged.Load()
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("objstore: repack: %w", err)
	}
	return nil
}

// after fills in the report's "after" half from the switched store.
func (rp *repacker) after(ctx context.Context, rep *RepackReport) error {
	s, err := openLocked(rp.dir, rp.liveConfig(16<<20), rp.lock, false)
	if err != nil {
		return err
	}
	defer s.closeKeepLock()
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	rep.SizeAfter, rep.StoredAfter = st.SegmentBytes, st.StoredBytes
	rep.ChainMaxAfter, rep.ChainMeanAfter = st.ChainMax, st.ChainMean
	return nil
}

// progress reports one more revision done.
func (rp *repacker) progress(size uint64) {
	rp.done.Add(1)
	rp.doneBytes.Add(int64(size))
	if rp.opt.Progress == nil {
		return
	}
	rp.progressMu.Lock()
	defer rp.progressMu.Unlock()
	rp.opt.Progress(RepackProgress{Revisions: rp.total, Done: rp.done.Load(), Committed: rp.committed.Load(),
		TotalBytes: uint64(rp.totalBytes), Bytes: uint64(rp.doneBytes.Load()), Elapsed: time.Since(rp.started)})
}

// closeKeepLock closes the store's index, segments and codecs but not its
// lock, which the repack holds throughout.
func (s *Store) closeKeepLock() error {
	errs := []error{s.segs.close(), s.idx.Close()}
	s.enc.Close()
	s.senc.Close()
	s.fenc.Close()
	s.dec.Close()
	return errors.Join(errs...)
}

// totalMemory returns the machine's memory in bytes, 0 if unknown.
func totalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// peakRSS returns the process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // Linux reports KiB
}
