package objstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/deltafs/deltafs/index"
)

// outcome says what repack did with one revision.
type outcome uint8

const (
	outRedelta   outcome = iota // base chosen again, record written anew
	outReused                   // existing delta record copied verbatim
	outUnchanged                // fulltext record copied verbatim, or a dedup
)

// fileWork is one job's state for the file it is repacking.
type fileWork struct {
	id    index.FileID
	name  string
	meta  index.FileMeta // the shadow's record: Revs = revisions done
	ratio float64        // stored fulltext bytes per text byte, 0 if unknown
}

// fullEstimate estimates the stored fulltext of a text of n bytes, 0 if
// the file's compression ratio is unknown yet.
func (fw *fileWork) fullEstimate(n uint64) uint64 {
	if fw.ratio == 0 {
		return 0
	}
	return uint64(recOverhead + fw.ratio*float64(n))
}

// repackFile repacks the revisions of one file the shadow does not hold
// yet, in revision order. Commits are shared by all jobs (see
// appended): a file's last revisions wait in the open batch for the next
// commit, whichever job makes it, so a store of many small files costs a
// commit per few hundred revisions, not one per file.
func (rp *repacker) repackFile(ctx context.Context, j fileJob) error {
	sm, err := rp.shadow.idx.File(j.id)
	if errors.Is(err, index.ErrNotFound) {
		sm, err = index.FileMeta{Name: j.meta.Name}, nil
	}
	if err != nil {
		return err
	}
	defer close(rp.fileDone[j.id])
	fw := &fileWork{id: j.id, name: j.meta.Name, meta: sm}
	for rev := rp.firstRev(sm); uint32(rev) < j.meta.Revs; rev++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := index.RevID{File: j.id, Rev: rev}
		if skip, err := rp.gcSkip(id, sm); skip || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		var written uint64
		b, err := rp.repackRev(ctx, fw, id, &written)
		if errors.Is(err, errRemoved) {
			continue
		}
		if err != nil {
			return fmt.Errorf("revision %d of file %d: %w", rev, j.id, err)
		}
		if err := rp.appended(b, written); err != nil {
			return err
		}
	}
	if fw.meta.Revs < j.meta.Revs {
		// The file's last revisions were left out (by this gc or an
		// earlier one): record that it is done all the same.
		fw.meta.Revs = j.meta.Revs
		if err := rp.appended(rp.shadow.enqueueMeta(j.id, fw.meta), 0); err != nil {
			return err
		}
	}
	return nil
}

// appended counts one more revision (of written record bytes) appended to
// the shadow's open batch b, and commits the batch, with every job's
// revisions in it, once it holds commitEvery revisions or
// repackCommitBytes: what an interruption may lose.
func (rp *repacker) appended(b *batch, written uint64) error {
	n := rp.uncommitted.Add(1)
	w := rp.unwritten.Add(written)
	if n < int64(rp.opt.commitEvery) && w < repackCommitBytes {
		return nil
	}
	rp.uncommitted.Store(0)
	rp.unwritten.Store(0)
	if err := rp.commit(b); err != nil {
		return err
	}
	rp.checkMemory()
	return nil
}

// commit waits until b (and so every revision appended before it) is
// durable in the shadow.
func (rp *repacker) commit(b *batch) error {
	done := rp.done.Load() // counted after their append: all in b or before
	if err := rp.shadow.wait(b); err != nil {
		return err
	}
	for c := rp.committed.Load(); c < done && !rp.committed.CompareAndSwap(c, done); c = rp.committed.Load() {
	}
	return nil
}

// commitRest commits what the jobs left in the shadow's open batch.
func (rp *repacker) commitRest() error {
	s := rp.shadow
	s.wmu.Lock()
	b := s.open
	s.wmu.Unlock()
	if b == nil {
		return nil
	}
	return rp.commit(b)
}

// repackRev decides how to store one revision and appends it to the shadow.
func (rp *repacker) repackRev(ctx context.Context, fw *fileWork, id index.RevID, written *uint64) (*batch, error) {
	e, err := rp.live.idx.Entry(id)
	if errors.Is(err, index.ErrNotFound) {
		return nil, errRemoved
	}
	if err != nil {
		return nil, err
	}
	if e.Lost() || rp.salv.isLost(id) {
		return rp.keepLost(fw, e), nil
	}
	if e.Kind == index.KindFull && !rp.salv.recovered(id) {
		fw.ratio = float64(e.Stored) / float64(max(e.Size, 1))
	}
	ne, rec, out, err := rp.decideKept(ctx, fw, e)
	if err != nil {
		return nil, err
	}
	s := rp.shadow
	s.wmu.Lock()
	if rec != nil {
		seg, off, err := s.segs.append(rec)
		if err != nil {
			s.wmu.Unlock()
			return nil, err
		}
		ne.Seg, ne.Off, ne.Stored = seg, off, uint32(len(rec))
		*written += uint64(len(rec))
	}
	fw.meta.Revs = max(fw.meta.Revs, uint32(id.Rev)+1) // gc may leave revisions out
	if ne.Kind.IsSnapshot() && (!fw.meta.HasSnap || ne.Rev > fw.meta.LastSnap) {
		fw.meta.LastSnap, fw.meta.HasSnap = ne.Rev, true
	}
	b := s.enqueue(ne, fw.meta)
	s.wmu.Unlock()
	rp.count(out)
	rp.progress(e.Size)
	return b, nil
}

// keepLost appends e to the shadow as lost (lostEntry): lost before, or
// by this salvage's plan.
func (rp *repacker) keepLost(fw *fileWork, e index.Entry) *batch {
	s := rp.shadow
	s.wmu.Lock()
	fw.meta.Revs = max(fw.meta.Revs, uint32(e.Rev)+1)
	b := s.enqueue(lostEntry(e), fw.meta)
	s.wmu.Unlock()
	rp.count(outUnchanged)
	rp.progress(e.Size)
	return b
}

func (rp *repacker) count(out outcome) {
	switch out {
	case outRedelta:
		rp.redeltaed.Add(1)
	case outReused:
		rp.reused.Add(1)
	default:
		rp.unchanged.Add(1)
	}
}

// decideKept is decide, except for a revision whose record is in a
// segment kept whole: the plan found decide keeps it exactly as it is
// (TestRepackPlanAgrees), so its entry stays, place included, and no
// record is appended.
//
// Its chain facts hold only if its base's new entry has the same ones, and
// it must still meet the caps: the plan says so, and this checks it.
// Should the two ever disagree (a bug), the repack fails before its
// switch, leaving the store as it was, rather than keep an entry whose
// chain facts are wrong; storing the revision anew instead would leave
// its old record in the kept segment, bytes no entry points at.
func (rp *repacker) decideKept(ctx context.Context, fw *fileWork, e index.Entry) (index.Entry, []byte, outcome, error) {
	if e.Stored == 0 || !rp.kept[e.Seg] {
		return rp.decide(ctx, fw, e)
	}
	if e.Kind == index.KindFull {
		return e, nil, outUnchanged, nil
	}
	c, ok, err := rp.reuseCandidate(ctx, fw, e)
	if err != nil {
		return index.Entry{}, nil, 0, err
	}
	if !ok || reusedOn(e, c) != e || rule(c, Target{TextLen: e.Size, FullLen: math.MaxUint64}, rp.caps) != "" {
		return index.Entry{}, nil, 0, fmt.Errorf("%w: revision %v in kept segment %d: its base %v changed or its chain breaks the caps; --reuse=never repacks without keeping segments",
			errPlanDiverged, e.ID(), e.Seg, e.Base)
	}
	return e, nil, outReused, nil
}

// errRemoved: a revision number below the file's count has no entry: an
// earlier gc removed it (its history may start past revision 0, or have
// gaps), so there is nothing to repack.
var errRemoved = errors.New("revision removed by gc")

// errPlanDiverged: see decideKept.
var errPlanDiverged = errors.New("repack plan and decision disagree")

// decide returns the new entry (without its place) and the record to
// append (nil for a dedup).
func (rp *repacker) decide(ctx context.Context, fw *fileWork, e index.Entry) (index.Entry, []byte, outcome, error) {
	if rp.salv.recovered(e.ID()) {
		return rp.recomputeSalvaged(ctx, fw, e)
	}
	if e.Kind == index.KindDedup {
		return rp.dedupEntry(e), nil, outUnchanged, nil
	}
	if rp.opt.Reuse == ReuseAuto && e.Kind == index.KindFull && e.Flags&index.FlagRepacked != 0 {
		raw, err := rp.rawRecord(&e)
		return e, raw, outUnchanged, err // a repack found no better base for it
	}
	if rp.opt.Reuse == ReuseAuto && e.Kind != index.KindFull {
		ne, rec, ok, err := rp.tryReuse(ctx, fw, e)
		if ok || err != nil {
			return ne, rec, outReused, err
		}
	}
	ne, rec, out, err := rp.recompute(ctx, fw, e)
	ne.Flags |= index.FlagRepacked
	return ne, rec, out, err
}

// dedupEntry keeps a dedup as it is, with its target's new chain facts if
// the target is done already (the switch refreshes them otherwise).
func (rp *repacker) dedupEntry(e index.Entry) index.Entry {
	if te, err := rp.shadow.entry(e.Base); err == nil {
		e.ChainLen, e.ChainBytes, e.Seg, e.Off = te.ChainLen, te.ChainBytes, te.Seg, te.Off
	}
	return e
}

// reuseTrust: with --reuse=auto an existing delta is kept without even
// reading the text when it meets the caps and is under 1/reuseTrust of the
// file's estimated compressed fulltext. Re-deltaing it could save at most
// its own size, less than 1/16 of a fulltext, and would cost a rebuild of
// the text and a delta per candidate: the cost git's reuse avoids (5x the
// CPU for a pack 36% smaller, most of the gain from large deltas). Larger
// deltas are re-examined, with the existing one as a candidate.
const reuseTrust = 16

// tryReuse keeps e's delta verbatim if its base is already in the shadow,
// the new chain meets the caps and the delta is small enough to trust, or
// an earlier repack chose it (index.FlagRepacked). A two-base record
// (index.KindP1P2) is kept only if both its bases are, as they were (the
// same revisions, so the same texts), with its chain facts counted again
// on the shadow's graph.
func (rp *repacker) tryReuse(ctx context.Context, fw *fileWork, e index.Entry) (index.Entry, []byte, bool, error) {
	c, ok, err := rp.reuseCandidate(ctx, fw, e)
	if !ok || err != nil {
		return index.Entry{}, nil, false, err // base in a file not done yet
	}
	est := fw.fullEstimate(e.Size)
	trusted := e.Flags&index.FlagRepacked != 0 // chosen by a repack's full search
	t := Target{TextLen: e.Size, FullLen: est}
	if trusted {
		// It was smaller than the real compressed fulltext then, and the
		// text has not changed; the estimate from the file's ratio is
		// not worth more than that (it misses on tiny texts, which zstd
		// cannot shrink). Only the caps are checked again.
		t.FullLen = math.MaxUint64
	}
	if !trusted && (est == 0 || uint64(e.Stored)*reuseTrust > est) || rule(c, t, rp.caps) != "" {
		return index.Entry{}, nil, false, nil
	}
	raw, err := rp.rawRecord(&e)
	if err != nil {
		return index.Entry{}, nil, false, err
	}
	return reusedOn(e, c), raw, true, nil
}

// reuseCandidate returns e's existing delta as a candidate on its
// base's (or bases') new entries, if they are in the shadow.
func (rp *repacker) reuseCandidate(ctx context.Context, fw *fileWork, e index.Entry) (Candidate, bool, error) {
	be, ok := rp.doneEntry(ctx, fw.id, e.Base)
	if !ok {
		return Candidate{}, false, nil
	}
	c := candidateOf(RoleCarried, be)
	if e.Kind == index.KindP1P2 {
		be2, ok := rp.doneEntry(ctx, fw.id, e.Base2)
		if !ok || be.ID() != e.Base || be2.ID() != e.Base2 {
			return Candidate{}, false, nil
		}
		var err error
		if c, err = rp.shadow.twoBaseFacts(be, be2, e.Size); err != nil {
			return Candidate{}, false, err
		}
		c.Role, c.BaseIsSnapshot = RoleCarried, false
	}
	c.DeltaLen = int64(e.Stored)
	return c, true, nil
}

// reusedOn is e kept verbatim on the base facts of c (its reuseCandidate).
func reusedOn(e index.Entry, c Candidate) index.Entry {
	e.ChainLen, e.ChainBytes = c.BaseChainLen+1, c.BaseChainBytes+uint64(e.Stored)
	if (e.Kind == index.KindIntermediate || e.Kind == index.KindSnapshot) && !c.BaseIsSnapshot {
		e.Kind = index.KindHint // its base is no longer a snapshot
	}
	return e
}

// reusedEntry is e kept verbatim on top of its base's new entry be.
func reusedEntry(e, be index.Entry) index.Entry {
	return reusedOn(e, candidateOf(RoleCarried, be))
}

// liveFormat raises the live store's format to v before the switch can
// bring in a record that needs it (a two-base record a repack chose).
func (rp *repacker) liveFormat(v int) error {
	rp.live.wmu.Lock()
	defer rp.live.wmu.Unlock()
	return rp.live.needFormat(v)
}

// rawRecord reads e's whole record and checks it, to copy it verbatim.
func (rp *repacker) rawRecord(e *index.Entry) ([]byte, error) {
	s := rp.live
	if err := lostCheck(e.ID(), e); err != nil {
		return nil, err
	}
	if e.Stored < recOverhead || e.Stored > recOverhead+maxPayload {
		return nil, corrupt(e.ID(), e, fmt.Errorf("index gives a record of %d bytes", e.Stored))
	}
	s.readRecords.Add(1)
	s.readBytes.Add(int64(e.Stored))
	raw, err := s.segs.readAt(e.Seg, e.Off, int(e.Stored))
	if err != nil {
		return nil, corrupt(e.ID(), e, err)
	}
	h, _, err := decodeRecord(raw)
	if err == nil {
		err = agree(&h, e)
	}
	if err != nil {
		return nil, corrupt(e.ID(), e, err)
	}
	return raw, nil
}

// doneEntry returns id's entry in the shadow, resolved past a dedup, if
// it is in a file with an id no higher than self. A revision of a lower
// file that another job is still repacking is waited for: files are
// handed out in id order, so those waits end (never a cycle), and a base
// in another file (a copy's source, a similar file) stays a candidate
// whatever the number of jobs. A higher file's revision is never offered,
// even if its job happens to have done it already: what repack chooses
// must not depend on the jobs' timing (same store and options, same
// result; files repacked one after another never see a higher file).
func (rp *repacker) doneEntry(ctx context.Context, self index.FileID, id index.RevID) (index.Entry, bool) {
	e, ok := rp.doneOne(ctx, self, id)
	if !ok || e.Kind != index.KindDedup {
		return e, ok
	}
	return rp.doneOne(ctx, self, e.Base)
}

// doneOne is doneEntry without following a dedup. An entry in the shadow
// never changes once appended, so a lower file's revision found there
// needs no wait.
func (rp *repacker) doneOne(ctx context.Context, self index.FileID, id index.RevID) (index.Entry, bool) {
	if id.IsNull() || id.File > self {
		return index.Entry{}, false
	}
	if e, err := rp.shadow.entry(id); err == nil || id.File == self {
		return e, err == nil
	}
	if ch := rp.fileDone[id.File]; ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return index.Entry{}, false
		}
	}
	e, err := rp.shadow.entry(id)
	return e, err == nil
}

// checkMemory clears the text cache when the heap nears the memory limit.
func (rp *repacker) checkMemory() {
	if rp.opt.MemoryLimit <= 0 {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > uint64(rp.opt.MemoryLimit)*9/10 {
		rp.opt.Logger.Info("near the memory limit: clearing the text cache", "heap", ms.HeapAlloc)
		rp.live.cache.clear()
		runtime.GC()
	}
}
