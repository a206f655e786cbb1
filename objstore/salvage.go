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

// Salvage rewrites a damaged store so that it can go on: a repack that
// stores every revision that still reads as it would any other, brings
// back what it can of those that do not, and keeps the rest as lost.
//
// A revision does not read when its record is bad (a flipped byte, a
// segment cut short behind the store's back: the damage Store.Damage
// reports) or a record its chain is built on is. Salvage brings one back
// when its content is still somewhere, found by its content hash and
// size: in its file's live file (the common case after a tail was cut:
// the newest revisions are the lost ones, and the live tree still holds
// them), or in another revision that reads. Revisions whose chain needed
// it then read again too. What is left is lost: its entry stays, with its
// place in the history, parents, size, hash and time, marked
// index.FlagLost with no record, so that logs and snapshots still name it
// and a read of it fails with ErrLost (an I/O error through a mount).
// The mark of damage goes with the switch. gc and repack, which refuse a
// damaged store, run on a salvaged one; verify counts its lost revisions
// without calling them problems.
//
// Not brought back: a revision with no content hash (stored from a delta
// alone: an in-place write, an append) other than its file's newest,
// whose own record is bad (the newest comes back from its live file
// when that has not changed since: deferredFromLive), and a two-base
// record whose graph holds a brought-back revision (graph reads do not
// consult them). The plan is in salvage_plan.go.
func Salvage(ctx context.Context, dir string, opt SalvageOptions) (SalvageReport, error) {
	start := time.Now()
	ropt := opt.Repack.withDefaults()
	ropt.Reuse, ropt.salvage = ReuseNever, true
	if err := checkStore(dir); err != nil {
		return SalvageReport{}, err
	}
	lock, err := acquireLock(dir, "salvage")
	if err != nil {
		return SalvageReport{}, err
	}
	defer lock.release()
	if err := recoverRepack(dir, ropt.Logger); err != nil {
		return SalvageReport{}, err
	}
	var liveFile func(index.FileID) (string, bool)
	if opt.LiveFiles != nil {
		paths, err := opt.LiveFiles()
		if err != nil {
			return SalvageReport{}, fmt.Errorf("objstore: salvage: %w", err)
		}
		liveFile = func(f index.FileID) (string, bool) { p, ok := paths[f]; return p, ok }
	}
	rp, err := newRepacker(ctx, dir, ropt, lock)
	if err != nil {
		return SalvageReport{}, err
	}
	plan, err := planSalvage(ctx, rp.live, liveFile, ropt.Logger)
	rep := SalvageReport{DryRun: opt.DryRun, LostRevisions: []LostRev{}}
	if plan != nil {
		rep.Damaged, rep.Recovered, rep.Lost = int64(len(plan.bad)), plan.recoveredCount(), int64(len(plan.lost))
		rep.FromLive, rep.FromOther = plan.fromLive, plan.fromOther
		for _, id := range plan.lostList {
			rep.LostRevisions = append(rep.LostRevisions, LostRev{File: id.File, Rev: id.Rev})
		}
	}
	if err != nil || opt.DryRun || plan.nothing(rp.live) {
		rp.live.closeKeepLock()
		if err == nil && !opt.DryRun && liveFile != nil && len(plan.lostBefore) > 0 {
			// A salvage killed after its switch: what it left to do.
			rep.Rerecorded, err = recordLostNewest(ctx, dir, ropt, lock, plan.lostBefore, liveFile)
		}
		rep.Duration = time.Since(start)
		return rep, err
	}
	rp.salv = plan
	rp.shadow, err = openShadow(dir, ropt, nil)
	err = dropFailedShadow(ctx, dir, ropt.Logger, err)
	if err != nil {
		rp.live.closeKeepLock()
		return rep, err
	}
	rr, err := rp.run(ctx)
	err = dropFailedShadow(ctx, dir, ropt.Logger, err)
	if err == nil {
		err = removeDamageMark(dir)
	}
	if err == nil && liveFile != nil {
		files := map[index.FileID]bool{}
		for _, id := range plan.lostList {
			files[id.File] = true
		}
		for f := range plan.lostBefore {
			files[f] = true
		}
		rep.Rerecorded, err = recordLostNewest(ctx, dir, ropt, lock, files, liveFile)
	}
	rep.Repack = &rr
	rep.Duration = time.Since(start)
	return rep, err
}

// salvageHint follows the refusal of gc and repack on a damaged store.
const salvageHint = "'deltafs salvage STORE' keeps what still reads and marks the rest lost, if no backup has the segment"

// withSalvageHint adds salvageHint to a failure on bad stored bytes (a
// bad record met by a gc or repack) that does not carry it yet.
func withSalvageHint(err error) error {
	if err == nil || !errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), salvageHint) {
		return err
	}
	return fmt.Errorf("%w; %s", err, salvageHint)
}

// SalvageOptions tune Salvage.
type SalvageOptions struct {
	Repack RepackOptions // how the salvaged store is written (Reuse is never)
	// LiveFiles returns the path of each store file's live file, read
	// once the store is locked: the first place Salvage looks for a lost
	// revision's content (mount's LivePaths). nil: nowhere.
	LiveFiles func() (map[index.FileID]string, error)
	DryRun    bool // plan and report; write nothing
}

// SalvageReport says what Salvage found and did.
type SalvageReport struct {
	Damaged       int64     `json:"damaged"`   // revisions that did not read back
	Recovered     int64     `json:"recovered"` // of them, brought back (read again)
	FromLive      int64     `json:"from_live"` // contents found in a live file
	FromOther     int64     `json:"from_other"`
	Lost          int64     `json:"lost"` // kept as lost
	LostRevisions []LostRev `json:"lost_revisions"`
	// Rerecorded counts live files whose newest revision was lost and
	// whose content is now a new revision after it.
	Rerecorded int64         `json:"rerecorded"`
	DryRun     bool          `json:"dry_run"`
	Repack     *RepackReport `json:"repack,omitempty"` // the rewrite; nil when nothing was written
	Duration   time.Duration `json:"duration_ns"`
}

// LostRev names a revision a salvage kept as lost.
type LostRev struct {
	File index.FileID `json:"file"`
	Rev  index.Rev    `json:"rev"`
}

// recordLostNewest records, in the salvaged store, the content of every
// live file whose newest revision is lost as a new revision after it
// (its child): the live tree holds what the history lost, and snapshots
// to come name a revision that reads.
func recordLostNewest(ctx context.Context, dir string, opt RepackOptions, lock *storeLock, files map[index.FileID]bool, liveFile func(index.FileID) (string, bool)) (int64, error) {
	if len(files) == 0 {
		return 0, nil
	}
	s, err := openLocked(dir, Config{Logger: opt.Logger}.withDefaults(), lock, false)
	if err != nil {
		return 0, err
	}
	defer s.closeKeepLock()
	var n int64
	for f := range files {
		e, ok, err := s.Latest(f)
		if err != nil {
			return n, err
		}
		path, live := liveFile(f)
		if !ok || !e.Lost() || !live {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return n, fmt.Errorf("objstore: salvage: %w", err)
		}
		if _, err := s.Put(ctx, PutRequest{File: f, Data: data, P1: e.ID(), Time: time.Now()}); err != nil {
			return n, fmt.Errorf("objstore: salvage: record %s again: %w", path, err)
		}
		n++
	}
	return n, nil
}

// removeDamageMark removes the mark of damage of the store in dir, the
// store now rewritten without the damage.
func removeDamageMark(dir string) error {
	err := os.Remove(filepath.Join(dir, damageFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("objstore: salvage: %w", err)
	}
	return index.SyncDir(dir)
}
