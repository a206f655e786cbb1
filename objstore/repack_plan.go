package objstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/index"
)

// A repack with --reuse=auto of a store an earlier repack left as it is
// would change nothing: it keeps every record verbatim, and every entry
// with the same chain facts. git's `repack -ad` reuses its pack whole in
// that case; repack plans the same from the index alone before it opens a
// shadow, in one pass: which revisions it would keep exactly as they are
// (stable), and so which segments hold nothing else. When every segment
// does, the store is left alone: no record is read or copied, no entry
// written (but the tail, once: see freshTail), nothing to switch, and
// so nothing a crash could leave half done.
//
// A revision is stable when decide would keep it as it is, which the
// index alone tells (no text is needed):
//   - a fulltext an earlier repack chose (index.FlagRepacked);
//   - a delta an earlier repack chose whose base is stable, in a file no
//     higher than its own (doneEntry offers no other), and whose chain
//     still meets the caps: tryReuse's trusted case;
//   - a delta no repack chose, small enough for tryReuse to keep without
//     looking further (reuseTrust), against the same fulltext estimate:
//     the file's last fulltext's ratio, known for sure while nothing
//     before it in the file changes;
//   - a dedup of a stable revision (in any file: dedupEntry and the
//     switch take its target's chain facts wherever it is).
//
// Anything else may change, and so may every revision based on it; a
// revision gc removes is not stable either.
//
// When only some segments hold nothing but stable revisions (a repacked
// store written to since, a gc that removes a few revisions), those are
// kept whole (repack_keep.go): linked into the shadow under the same
// number instead of copied, their revisions' entries kept as they are.

// repackPlan is what the plan found.
type repackPlan struct {
	revisions  int64
	changed    int64             // revisions that are not stable
	segs       map[uint32]uint64 // record bytes of each segment's revisions
	changedIn  map[uint32]bool   // segments holding a revision that is not stable
	changedSet *index.Refs       // the revisions that are not stable
}

// whole reports whether the repack would leave the store as it is: every
// revision stable and every segment byte one of their records (a segment
// with dead bytes, or none referenced, is rewritten).
func (p *repackPlan) whole(sizes map[uint32]int64) bool {
	if p.changed > 0 || len(p.changedIn) > 0 || len(sizes) != len(p.segs) {
		return false
	}
	for n, b := range p.segs {
		if sz, ok := sizes[n]; !ok || uint64(sz) != b {
			return false
		}
	}
	return true
}

// planFile is the plan's state for the file being walked.
type planFile struct {
	id     index.FileID
	stable map[index.Rev]index.Entry
	ratio  float64 // as fileWork.ratio, while ratioOK
	// ratioOK: no revision before in the file is recomputed, which may
	// set the ratio from a compressed text (fullLen).
	ratioOK bool
}

// plan walks the live index once (reuse=auto).
func (rp *repacker) plan(ctx context.Context) (*repackPlan, error) {
	p := &repackPlan{segs: map[uint32]uint64{}, changedIn: map[uint32]bool{}}
	changed := index.NewRefs() // of earlier files, for bases in other files
	var f planFile
	var later []index.Entry // dedups of a revision of a higher file
	err := rp.live.idx.All(ctx, func(e index.Entry) error {
		if e.File != f.id {
			f = planFile{id: e.File, stable: map[index.Rev]index.Entry{}, ratioOK: true}
		}
		if e.Kind == index.KindFull && !e.Lost() && rp.keeps(e.ID()) { // as repackRev sets it
			f.ratio = float64(e.Stored) / float64(max(e.Size, 1))
		}
		p.revisions++
		if e.Kind == index.KindDedup && e.Base.File > e.File && rp.keeps(e.ID()) {
			later = append(later, e)
			return nil
		}
		ok := rp.keeps(e.ID()) && rp.stable(e, &f, changed)
		if ok {
			f.stable[e.Rev] = e
		} else {
			f.ratioOK = f.ratioOK && e.Kind == index.KindFull
			p.changed++
			if k, err := index.RefKey(e.ID()); err == nil {
				changed.Add(k)
			}
		}
		if e.Stored > 0 {
			p.segs[e.Seg] += uint64(e.Stored)
			if !ok {
				p.changedIn[e.Seg] = true
			}
		}
		return nil
	})
	for _, e := range later {
		if k, err := index.RefKey(e.Base); err != nil || changed.Contains(k) {
			p.changed++
			if k, err := index.RefKey(e.ID()); err == nil {
				changed.Add(k)
			}
		}
	}
	p.changedSet = changed
	return p, err
}

// keeps says whether the repack keeps id at all (gc leaves some out).
func (rp *repacker) keeps(id index.RevID) bool { return rp.opt.keep == nil || rp.opt.keep.keeps(id) }

// keptWhole returns the segments whose every byte is a stable revision's
// record, given the size of every segment file.
func (p *repackPlan) keptWhole(sizes map[uint32]int64) map[uint32]bool {
	kept := map[uint32]bool{}
	for n, b := range p.segs {
		if sz, ok := sizes[n]; ok && uint64(sz) == b && !p.changedIn[n] {
			kept[n] = true
		}
	}
	return kept
}

// stable says whether decide would keep e exactly as it is.
func (rp *repacker) stable(e index.Entry, f *planFile, changed *index.Refs) bool {
	if e.Lost() {
		return true // kept as it is (keepLost)
	}
	if e.Kind == index.KindDedup {
		_, ok := rp.stableBase(e.Base, f, changed)
		return ok
	}
	trusted := e.Flags&index.FlagRepacked != 0
	if e.Kind == index.KindFull {
		return trusted
	}
	c, ok := rp.stableCandidate(e, f, changed)
	if !ok {
		return false
	}
	t := Target{TextLen: e.Size, FullLen: math.MaxUint64} // as tryReuse has it for a trusted delta
	if !trusted {
		est := (&fileWork{ratio: f.ratio}).fullEstimate(e.Size)
		if !f.ratioOK || est == 0 || uint64(e.Stored)*reuseTrust > est {
			return false
		}
		t.FullLen = est
	}
	return rule(c, t, rp.caps) == "" && reusedOn(e, c) == e
}

// stableCandidate is reuseCandidate in the plan: e's delta on its
// base's (bases') entries, if the plan found them stable. A two-base
// record's graph is then the same as it was, so its facts are counted
// on the live store's.
func (rp *repacker) stableCandidate(e index.Entry, f *planFile, changed *index.Refs) (Candidate, bool) {
	be, ok := rp.stableBase(e.Base, f, changed)
	if ok && be.Kind == index.KindDedup {
		be, ok = rp.stableBase(be.Base, f, changed) // doneEntry resolves a dedup base to its target
	}
	if !ok {
		return Candidate{}, false
	}
	c := candidateOf(RoleCarried, be)
	if e.Kind == index.KindP1P2 {
		be2, ok := rp.stableBase(e.Base2, f, changed)
		if !ok || be.ID() != e.Base || be2.Kind == index.KindDedup {
			return Candidate{}, false
		}
		var err error
		// The graph's records of this file are in f.stable: a map
		// lookup each, not an index read (the plan of a repacked S2
		// store walked 123 graphs of ~250 records).
		entry := func(id index.RevID) (index.Entry, error) {
			if e, ok := f.stable[id.Rev]; ok && id.File == f.id {
				return e, nil
			}
			return rp.live.entry(id)
		}
		if c, err = twoBaseFacts(entry, be, be2, e.Size); err != nil {
			return Candidate{}, false
		}
		c.Role, c.BaseIsSnapshot = RoleCarried, false
	}
	c.DeltaLen = int64(e.Stored)
	return c, true
}

// stableBase returns the entry of id, a base of a revision of file f.id,
// if the plan found it stable.
func (rp *repacker) stableBase(id index.RevID, f *planFile, changed *index.Refs) (index.Entry, bool) {
	if id.IsNull() || id.File > f.id {
		return index.Entry{}, false
	}
	if id.File == f.id {
		be, ok := f.stable[id.Rev]
		return be, ok
	}
	k, err := index.RefKey(id)
	if err != nil || changed.Contains(k) {
		return index.Entry{}, false
	}
	be, err := rp.live.idx.Entry(id)
	return be, err == nil
}

// segmentSizes returns the size of every segment file of the store in dir.
func segmentSizes(dir string) (map[uint32]int64, error) {
	ns, err := listSegments(filepath.Join(dir, segmentsName))
	if err != nil {
		return nil, err
	}
	sizes := make(map[uint32]int64, len(ns))
	for _, n := range ns {
		st, err := os.Stat(filepath.Join(dir, segmentsName, segName(n)))
		if err != nil {
			return nil, fmt.Errorf("objstore: %w", err)
		}
		sizes[n] = st.Size()
	}
	return sizes, nil
}

// planSegments plans (reuse=auto) and, when the repack would leave the
// store as it is, fills rep in and returns true: the caller stops there.
// A shadow an interrupted run left is removed then: it could only rewrite
// records as they are. Otherwise it sets the segments kept whole.
func (rp *repacker) planSegments(ctx context.Context, rep *RepackReport) (bool, error) {
	if rp.opt.Reuse != ReuseAuto {
		return false, nil
	}
	p, err := rp.plan(ctx)
	if err != nil {
		return false, err
	}
	sizes, err := segmentSizes(rp.dir)
	if err != nil {
		return false, err
	}
	if rp.opt.keep != nil || rp.opt.noWhole || !p.whole(sizes) {
		rp.kept = p.keptWhole(sizes)
		if rp.opt.keepAll {
			for n := range sizes {
				rp.kept[n] = true
			}
		}
		return false, nil
	}
	if err := removeShadow(filepath.Join(rp.dir, shadowName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	// What is written next goes to a segment of its own (see freshTail):
	// the one index row this writes, once.
	if err := freshTail(rp.live); err != nil {
		return false, err
	}
	st, err := rp.live.Stats(ctx)
	if err != nil {
		return false, err
	}
	*rep = RepackReport{Files: st.Files, Revisions: st.Revisions, SizeBefore: st.SegmentBytes, SizeAfter: st.SegmentBytes,
		StoredBefore: st.StoredBytes, StoredAfter: st.StoredBytes, Unchanged: st.Revisions, Whole: true,
		ChainMaxBefore: st.ChainMax, ChainMaxAfter: st.ChainMax, ChainMeanBefore: st.ChainMean, ChainMeanAfter: st.ChainMean,
		Window: rp.window, Jobs: rp.opt.Jobs}
	return true, nil
}
