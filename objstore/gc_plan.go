package objstore

import (
	"context"
	"time"

	"github.com/deltafs/deltafs/index"
)

// GCPolicy says which revisions that no snapshot references gc keeps.
// Per-file history is the product (every revision of a live file is
// shown in its history), so by default gc removes only what nobody can
// reach any more: revisions of deleted files that no snapshot holds.
//
//   - kept always: every revision any snapshot references, and the newest
//     revision of every live file;
//   - kept by default: every other revision of a live file (its history);
//   - removed: revisions of deleted files that no snapshot references;
//   - PruneUnsnapshotted: live files' history goes too, except the newest;
//   - KeepWithin > 0 (implies pruning): revisions recorded within that
//     long before Now stay, whatever file they belong to.
//
// A kept revision that is a dedup of another keeps its target too (it has
// no data of its own). A kept revision whose delta base is removed is
// stored again against a kept base (gc rewrites the store as a repack
// does), so chains never keep dead revisions alive.
type GCPolicy struct {
	PruneUnsnapshotted bool
	KeepWithin         time.Duration
	Now                time.Time // the reference time of KeepWithin; zero: time.Now()
}

func (p GCPolicy) prunes() bool { return p.PruneUnsnapshotted || p.KeepWithin > 0 }

// gcPlan is what gc keeps and what it removes.
type gcPlan struct {
	keep          *index.Refs // RefKey of every kept revision
	snapshots     int
	liveFiles     int
	revisions     int64
	kept          int64
	removed       int64
	removedStored uint64 // record bytes of the removed revisions
	removedFiles  int64  // files none of whose revisions is kept
}

// planGC decides every revision's fate in one pass over the index: the
// union of the snapshots' reference sets (roaring ORs, so the cost
// follows the revisions they hold, not snapshots x history), then one
// membership test per revision.
func planGC(ctx context.Context, s *Store, live map[index.FileID]bool, pol GCPolicy) (*gcPlan, error) {
	p := &gcPlan{keep: index.NewRefs(), liveFiles: len(live)}
	roots := index.NewRefs()
	err := s.idx.SnapshotRefsAll(func(_ index.Snapshot, r *index.Refs) error {
		p.snapshots++
		roots.Or(r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A live file's newest stored revision, which an earlier gc may have
	// left below Revs-1 (the file was deleted then and is live again).
	newest := map[index.FileID]index.Rev{}
	for f := range live {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e, ok, err := s.idx.Latest(f)
		if err != nil {
			return nil, err
		}
		if ok {
			newest[f] = e.Rev
		}
	}
	now := pol.Now
	if now.IsZero() {
		now = time.Now()
	}
	cutoff := now.Add(-pol.KeepWithin).UnixNano()
	var dropped []index.Entry
	var dedupTargets []index.RevID
	err = s.idx.All(ctx, func(e index.Entry) error {
		p.revisions++
		k, err := index.RefKey(e.ID())
		if err != nil {
			return err
		}
		keep := roots.Contains(k)
		if !keep && live[e.File] {
			keep = !pol.prunes() || newest[e.File] == e.Rev
		}
		if !keep && pol.KeepWithin > 0 {
			keep = e.Time >= cutoff
		}
		if !keep {
			dropped = append(dropped, index.Entry{File: e.File, Rev: e.Rev, Stored: e.Stored})
			return nil
		}
		p.keep.Add(k)
		if e.Kind == index.KindDedup {
			dedupTargets = append(dedupTargets, e.Base)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, t := range dedupTargets {
		k, err := index.RefKey(t)
		if err != nil {
			return nil, err
		}
		p.keep.Add(k)
	}
	p.count(dropped)
	return p, nil
}

// count fills in the totals from the revisions dropped in the first pass
// (some of which a dedup brought back).
func (p *gcPlan) count(dropped []index.Entry) {
	alive := map[index.FileID]bool{}
	for _, e := range dropped {
		k, _ := index.RefKey(e.ID())
		if p.keep.Contains(k) {
			continue
		}
		p.removed++
		p.removedStored += uint64(e.Stored)
		if _, ok := alive[e.File]; !ok {
			alive[e.File] = false
		}
	}
	it := p.keep.Iterator()
	for it.HasNext() {
		id := index.RefID(it.Next())
		if _, ok := alive[id.File]; ok {
			alive[id.File] = true
		}
	}
	for _, a := range alive {
		if !a {
			p.removedFiles++
		}
	}
	p.kept = p.revisions - p.removed
}

// kept reports whether the plan keeps id (every revision without a plan).
func (p *gcPlan) keeps(id index.RevID) bool {
	if p == nil {
		return true
	}
	k, err := index.RefKey(id)
	return err == nil && p.keep.Contains(k)
}
