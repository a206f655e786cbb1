package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/deltafs/deltafs/index"
)

// GCOptions tune GC.
type GCOptions struct {
	Policy GCPolicy
	// Live returns the store files the live tree still holds (their
	// newest revision is what the live file's content starts from). GC
	// calls it once it holds the store lock. nil: no file is live.
	Live func() (map[index.FileID]bool, error)
	// DryRun plans and reports without changing anything.
	DryRun bool
	// Repack tunes the rewrite of the kept revisions (window, caps, jobs,
	// memory, progress); the zero value gives Repack's defaults.
	Repack RepackOptions
}

// GCReport says what GC removed.
type GCReport struct {
	Snapshots     int           `json:"snapshots"`
	LiveFiles     int           `json:"live_files"`
	Revisions     int64         `json:"revisions"`
	Kept          int64         `json:"kept"`
	Removed       int64         `json:"removed"`
	RemovedFiles  int64         `json:"removed_files"`  // files none of whose revisions is kept
	RemovedStored uint64        `json:"removed_stored"` // record bytes of the removed revisions
	SizeBefore    uint64        `json:"size_before"`    // segment bytes on disk
	SizeAfter     uint64        `json:"size_after"`
	Reclaimed     uint64        `json:"reclaimed"` // SizeBefore - SizeAfter
	DryRun        bool          `json:"dry_run"`
	Repack        *RepackReport `json:"repack,omitempty"` // the rewrite, when there was one
	Duration      time.Duration `json:"duration_ns"`
	PeakRSS       int64         `json:"peak_rss"`
}

// GC removes the revisions of the store in dir that no snapshot and no
// live file needs any more under opt.Policy (see GCPolicy), and their
// data, offline: it takes the store lock (so it refuses a mounted store
// with a *LockError naming the mount), plans in one pass over the index,
// and, when something is to be removed, rewrites the store the way Repack
// does, leaving the removed revisions out: the kept ones go into a shadow
// store (a kept revision whose base is removed is stored again against a
// kept one, or as a fulltext), and the switch copies their entries into
// the live index, deletes the removed ones' entries, and swaps in the new
// segments. The crash safety and resumption are Repack's (see
// repack_shadow.go): until SWITCH is written the store is untouched, and
// from then on Open rolls the switch forward.
func GC(ctx context.Context, dir string, opt GCOptions) (GCReport, error) {
	start := time.Now()
	if err := checkStore(dir); err != nil {
		return GCReport{}, err
	}
	lock, err := acquireLock(dir, "gc")
	if err != nil {
		return GCReport{}, err
	}
	defer lock.release()
	ropt := opt.Repack.withDefaults()
	if err := recoverRepack(dir, ropt.Logger); err != nil {
		return GCReport{}, err
	}
	rep, plan, err := gcPlanLocked(ctx, dir, opt, lock)
	if err == nil && !opt.DryRun && plan.removed > 0 {
		ropt.keep = plan
		var rr RepackReport
		rr, err = repackLocked(ctx, dir, ropt, lock)
		rep.Repack = &rr
		rep.SizeAfter = rr.SizeAfter
	}
	if rep.SizeBefore > rep.SizeAfter {
		rep.Reclaimed = rep.SizeBefore - rep.SizeAfter
	}
	rep.Duration, rep.PeakRSS = time.Since(start), peakRSS()
	return rep, withSalvageHint(err)
}

// gcPlanLocked plans the collection of the locked store.
func gcPlanLocked(ctx context.Context, dir string, opt GCOptions, lock *storeLock) (GCReport, *gcPlan, error) {
	var live map[index.FileID]bool
	if opt.Live != nil {
		var err error
		if live, err = opt.Live(); err != nil {
			return GCReport{}, nil, fmt.Errorf("objstore: gc: live files: %w", err)
		}
	}
	s, err := openLocked(dir, Config{Logger: opt.Repack.Logger, CacheBytes: 1 << 20, LatestBytes: 1}.withDefaults(), lock, false)
	if err != nil {
		return GCReport{}, nil, err
	}
	defer s.closeKeepLock()
	if err := s.Damage(); err != nil {
		// It would fail at the first lost revision it rewrites.
		return GCReport{}, nil, fmt.Errorf("objstore: gc: refused: %w; %s", err, salvageHint)
	}
	plan, err := planGC(ctx, s, live, opt.Policy)
	if err == nil && !opt.DryRun {
		err = s.idx.RebuildHolds(ctx) // rows a build without them left stale (index/holds.go)
	}
	if err != nil {
		return GCReport{}, nil, fmt.Errorf("objstore: gc: %w", err)
	}
	tail, err := s.idx.Tail()
	if err != nil {
		return GCReport{}, nil, err
	}
	size := s.segmentBytes(tail)
	return GCReport{Snapshots: plan.snapshots, LiveFiles: plan.liveFiles, Revisions: plan.revisions,
		Kept: plan.kept, Removed: plan.removed, RemovedFiles: plan.removedFiles, RemovedStored: plan.removedStored,
		SizeBefore: size, SizeAfter: size, DryRun: opt.DryRun}, plan, nil
}

// gcMark is the line of a shadow's OPTIONS that says it leaves revisions
// out, so that the switch deletes their entries (and a plain repack never
// resumes a gc's shadow, nor the other way round).
const gcMark = "gc\n"

// isGCShadow reports whether the shadow in sdir is a gc's.
func isGCShadow(sdir string) bool {
	b, err := os.ReadFile(filepath.Join(sdir, optionsName))
	return err == nil && strings.Contains(string(b), "\n"+gcMark)
}

// checkKept refuses to switch to a shadow that lacks a revision the plan
// keeps: the last check before SWITCH makes the removal final.
func (rp *repacker) checkKept(ctx context.Context) error {
	it := rp.opt.keep.keep.Iterator()
	for it.HasNext() {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := index.RefID(it.Next())
		if _, err := rp.shadow.idx.Entry(id); err != nil {
			return fmt.Errorf("%w: gc: kept revision %v not in the new store: %w", ErrCorrupt, id, err)
		}
	}
	return nil
}

// deleteRemoved deletes from the live index the entries of file f that
// the gc shadow does not hold, in chunks. Repeating it deletes nothing
// more.
func deleteRemoved(ldb, sdb *index.DB, f index.FileID) error {
	var gone []index.Entry
	err := ldb.Revisions(nil, f, func(e index.Entry) error {
		_, err := sdb.Entry(e.ID())
		if errors.Is(err, index.ErrNotFound) {
			gone = append(gone, e)
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	for len(gone) > 0 {
		n := min(len(gone), switchChunk)
		if err := ldb.DeleteEntries(gone[:n]); err != nil {
			return err
		}
		gone = gone[n:]
	}
	return nil
}

// firstRev is where a file's repack starts: after the revisions the
// shadow holds, or, for a resumed gc, at 0, since a revision the plan
// did not keep then may be kept now (gcSkip passes over those done).
func (rp *repacker) firstRev(sm index.FileMeta) index.Rev {
	if rp.opt.keep != nil {
		return 0
	}
	return index.Rev(sm.Revs)
}

// gcSkip says whether a gc leaves id out: the plan does not keep it, or a
// resumed run finds it in the shadow already.
func (rp *repacker) gcSkip(id index.RevID, sm index.FileMeta) (bool, error) {
	if rp.opt.keep == nil {
		return false, nil
	}
	if !rp.opt.keep.keeps(id) {
		if uint32(id.Rev) >= sm.Revs { // else counted as resumed
			rp.progress(0)
		}
		return true, nil
	}
	if uint32(id.Rev) >= sm.Revs {
		return false, nil
	}
	_, err := rp.shadow.idx.Entry(id)
	if errors.Is(err, index.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// enqueueMeta adds a file record alone to the open batch.
func (s *Store) enqueueMeta(f index.FileID, meta index.FileMeta) *batch {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.enqueueFile(f, meta)
}

// keptAncestor stands in for a parent that gc removes: its nearest
// ancestor along first parents that gc keeps (or the null RevID). The
// parent is the candidate the repack window is built around (see
// windowOnlyWithParents); without a stand-in, the child of a removed
// revision would fall back to the file's snapshot or a fulltext, and gc
// would make the store larger.
func (rp *repacker) keptAncestor(id index.RevID) index.RevID {
	for rp.opt.keep != nil && !id.IsNull() && !rp.opt.keep.keeps(id) {
		e, err := rp.live.idx.Entry(id)
		if err != nil {
			return index.NullRev
		}
		id = e.P1
	}
	return id
}
