package objstore

import (
	"cmp"
	"context"
	"errors"
	"math/bits"
	"path"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// reuseMargin: under --reuse=auto a re-examined existing delta stays unless
// a new candidate is clearly better, i.e. at least 10% smaller. Below that
// the saving is within what the next edit of the file changes anyway, and
// keeping it avoids writing a new record (and churning the store on every
// repack of an already repacked store).
const reuseMargin = 0.9

// recompute chooses the revision's base among its window of candidates:
// parents, the nearest earlier revisions, the existing delta (reuse=auto);
// when none of them passes, the file's snapshots, then similar files.
func (rp *repacker) recompute(ctx context.Context, fw *fileWork, e index.Entry) (index.Entry, []byte, outcome, error) {
	text, err := rp.live.fulltextOf(ctx, e)
	if err != nil {
		return index.Entry{}, nil, 0, err
	}
	return rp.recomputeText(ctx, fw, e, text)
}

// recomputeSalvaged is recompute for a revision a salvage brought back
// (its text read through a found one): it is stored anew from its text
// as a new fulltext would be, its old record (bad, or on a bad base)
// never read.
func (rp *repacker) recomputeSalvaged(ctx context.Context, fw *fileWork, e index.Entry) (index.Entry, []byte, outcome, error) {
	text, err := rp.live.fulltextOf(ctx, e)
	if err != nil {
		return index.Entry{}, nil, 0, err
	}
	e.Kind, e.Base, e.Base2 = index.KindFull, index.NullRev, index.NullRev
	e.Flags |= index.FlagFastZstd // no record of it to keep (fullLen)
	ne, rec, out, err := rp.recomputeText(ctx, fw, e, text)
	ne.Flags |= index.FlagRepacked
	return ne, rec, out, err
}

// recomputeText is recompute with the revision's text at hand.
func (rp *repacker) recomputeText(ctx context.Context, fw *fileWork, e index.Entry, text []byte) (index.Entry, []byte, outcome, error) {
	t := Target{TextLen: e.Size}
	cands := rp.inFile(ctx, fw, e)
	if err := rp.computeAll(ctx, cands, text, t, 0); err != nil {
		return index.Entry{}, nil, 0, err
	}
	if two, ok, err := twoBaseCandidate(ctx, rp.shadow, rp.live, cands, text, t, rp.caps); err != nil {
		return index.Entry{}, nil, 0, err
	} else if ok {
		cands = append(cands, two)
	}
	full, err := rp.fullLen(fw, e, text, &t, cands)
	if err != nil {
		return index.Entry{}, nil, 0, err
	}
	windowOnlyWithParents(cands, t, rp.caps, e.Kind.IsSnapshot())
	d := SelectBase(t, plainOf(cands), rp.caps)
	if d.Choice < 0 {
		if cands, d, err = rp.widen(ctx, fw, e, text, t, cands); err != nil {
			return index.Entry{}, nil, 0, err
		}
	}
	d = preferExisting(d, cands)
	return rp.build(e, text, cands, d, full)
}

// windowOnlyWithParents drops the window's candidates when no parent (nor
// the existing delta) passes. The window is there to find a better base
// than the parents, not to stretch a chain that reached the cap: past the
// cap, deltas against ever older revisions would grow with every revision
// between, where an intermediate snapshot starts a short chain again (what
// a put does; see SelectBase). The existing record of a revision stored
// as a snapshot is no parent: its writer found no parent passing, and a
// window candidate then would stretch a chain at the cap (on S2's store,
// a snapshot replaced by a delta at the end of another line's 127-delta
// chain, which every later merge's graph then holds: 4 more intermediate
// snapshots and +20 KB, 10%, for a repack with --reuse=auto).
func windowOnlyWithParents(cands []prepared, t Target, caps Caps, snapshot bool) {
	for _, c := range cands {
		if c.Role != RoleHint && !(snapshot && c.Role == RoleCarried) && rule(c.Candidate, t, caps) == "" {
			return
		}
	}
	for i := range cands {
		if cands[i].Role == RoleHint {
			cands[i].DeltaLen, cands[i].payload = -1, nil
		}
	}
}

// widen adds the file's snapshots, then similar files' revisions, while no
// candidate passes.
func (rp *repacker) widen(ctx context.Context, fw *fileWork, e index.Entry, text []byte, t Target, cands []prepared) ([]prepared, Decision, error) {
	if fw.meta.HasSnap {
		snaps, err := rp.shadow.snapshotCandidates(index.RevID{File: fw.id, Rev: fw.meta.LastSnap}, computed(cands))
		if err != nil {
			return nil, Decision{}, err
		}
		if err := rp.computeAll(ctx, snaps, text, t, 0); err != nil {
			return nil, Decision{}, err
		}
		cands = append(cands, snaps...)
		if d := SelectBase(t, plainOf(cands), rp.caps); d.Choice >= 0 {
			return cands, d, nil
		}
	}
	more := rp.similarCandidates(fw, e.Size, computed(cands))
	if err := rp.computeAll(ctx, more, text, t, similarCut(len(text))); err != nil {
		return nil, Decision{}, err
	}
	for i := range more {
		// Another file's revision must be worth starting this file's chain
		// on: half the fulltext at most, and leave half the chain cap. Its
		// chain is known once its file is done (see similarCandidates).
		c := &more[i]
		if uint64(c.DeltaLen)*2 <= t.FullLen {
			be, ok := rp.doneEntry(ctx, fw.id, c.Base)
			c.BaseChainLen, c.BaseChainBytes, c.BaseIsSnapshot = be.ChainLen, be.ChainBytes, be.Kind.IsSnapshot()
			if !ok {
				c.DeltaLen = -1
			}
		}
		if uint64(c.DeltaLen)*2 > t.FullLen || c.BaseChainLen+1 > rp.caps.MaxChainLen/2 {
			c.DeltaLen, c.payload = -1, nil
		}
	}
	cands = append(cands, more...)
	return cands, SelectBase(t, plainOf(cands), rp.caps), nil
}

// computed returns the candidates whose delta was computed: a base dropped
// from the window (see windowOnlyWithParents) must still be tried as a
// snapshot.
func computed(cands []prepared) []prepared {
	var out []prepared
	for _, c := range cands {
		if c.DeltaLen >= 0 {
			out = append(out, c)
		}
	}
	return out
}

// inFile lists the candidates from the file itself (and its parents and
// existing base, wherever they are), bases resolved in the shadow.
func (rp *repacker) inFile(ctx context.Context, fw *fileWork, e index.Entry) []prepared {
	var out []prepared
	seen := map[index.RevID]bool{}
	add := func(r Role, id index.RevID) {
		if id.IsNull() {
			return
		}
		be, ok := rp.doneEntry(ctx, fw.id, id)
		if !ok || seen[be.ID()] || be.Lost() {
			return // e.g. a parent in a file not done yet
		}
		seen[be.ID()] = true
		out = append(out, prepared{Candidate: candidateOf(r, be)})
	}
	add(RoleP1, rp.keptAncestor(e.P1))
	add(RoleP2, rp.keptAncestor(e.P2))
	for i := 1; i <= rp.window && int(e.Rev)-i >= 0; i++ {
		add(RoleHint, index.RevID{File: e.File, Rev: e.Rev - index.Rev(i)})
	}
	if e.Kind == index.KindFull {
		return out
	}
	if rp.opt.Reuse == ReuseNever || e.Kind == index.KindP1P2 {
		// The existing base, with a fresh delta (a two-base record's own
		// delta is tried as it is by tryReuse, and again below through
		// twoBaseCandidate if its bases are p1 and p2).
		add(RoleHint, e.Base)
		return out
	}
	if be, ok := rp.doneEntry(ctx, fw.id, e.Base); ok {
		c := prepared{Candidate: candidateOf(RoleCarried, be)}
		c.DeltaLen = int64(e.Stored)
		out = append(out, c)
	}
	return out
}

// similarCut is the longest raw copy delta against another file's
// revision worth compressing for a text of n bytes: 3/4 of the text. Such
// a delta inserts most of the text as it is, so compressed it is about
// 3/4 of the compressed fulltext or more, where a similar file's delta
// must be at most half of it (see widen); neither it nor the
// zstd-dictionary codec (which finds the same matches, and shorter ones
// a copy delta leaves to the compressor) can win. On a store of many
// small unrelated files (R3) nearly every first revision's similar files
// are cut here, which saves compressing two deltas and a zstd-dictionary
// delta per file.
func similarCut(n int) int { return max(n*3/4, 1) }

// computeAll computes the candidates' deltas, skipping those whose chain
// alone breaks the caps and the existing delta (its size is known). A raw
// copy delta longer than cut (0: no cut) is left uncomputed (DeltaLen -1),
// not compressed. Up to Jobs deltas are computed at once: a single long
// history (one file) would otherwise use one core.
func (rp *repacker) computeAll(ctx context.Context, cands []prepared, text []byte, t Target, cut int) error {
	var todo []int
	for i := range cands {
		if cands[i].Role != RoleCarried && ChainRule(cands[i].Candidate, t, rp.caps) == "" {
			todo = append(todo, i)
		}
	}
	errs := make([]error, len(todo))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(rp.opt.Jobs, len(todo)) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(todo); k = int(next.Add(1) - 1) {
				errs[k] = rp.computeOne(ctx, &cands[todo[k]], text, cut)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return rp.tryZstd(ctx, cands, todo, text)
}

// computeOne computes one candidate's copy/insert delta, compressed,
// unless the raw delta is longer than cut (see computeAll). With a cut,
// a base that shares no long runs with the text (sharesRuns) is not even
// encoded against.
func (rp *repacker) computeOne(ctx context.Context, c *prepared, text []byte, cut int) error {
	base, err := rp.live.fulltext(ctx, c.Base)
	if errors.Is(err, ErrCorrupt) {
		// A base that cannot be read is no base. It is another
		// revision than the one repacked (whose text was read first):
		// the repack fails on it when it comes to it, under its own
		// name, or drops it (gc), where this failed the repack of a
		// revision that reads well, naming the other (a review).
		c.DeltaLen, c.payload = -1, nil
		return nil
	}
	if err != nil {
		return err
	}
	if cut > 0 && !sharesRuns(base, text) {
		c.DeltaLen, c.payload = -1, nil
		return nil
	}
	d := delta.Encode(base, text)
	if cut > 0 && len(d) > cut {
		c.DeltaLen, c.payload = -1, nil
		return nil
	}
	c.payload, c.flags = rp.live.compress(d)
	c.flags |= recFlagDelta
	c.DeltaLen = int64(recOverhead + len(c.payload))
	return nil
}

// tryZstd tries the zstd-dictionary codec (what a put tries beside the
// copy codec, see encodeDelta) on the candidate with the smallest copy
// delta only, keeping it if smaller. The copy delta's size ranks the
// bases well, and a zstd-dictionary delta costs the most of anything
// repack computes (its tables are rebuilt for every base); trying it on
// every candidate of the window cost R3's 10,000 small files a third of
// their CPU time.
func (rp *repacker) tryZstd(ctx context.Context, cands []prepared, todo []int, text []byte) error {
	best := -1
	for _, i := range todo {
		if cands[i].payload != nil && (best < 0 || cands[i].DeltaLen < cands[best].DeltaLen) {
			best = i
		}
	}
	if best < 0 || len(cands[best].payload) <= zstdTryMin {
		return nil
	}
	base, err := rp.live.fulltext(ctx, cands[best].Base)
	if err != nil || len(base) > zstdTryMaxBase {
		return err
	}
	if z, err := delta.EncodeZstd(base, text, 2); err == nil && len(z) < len(cands[best].payload) {
		cands[best].payload, cands[best].flags = z, recFlagDelta
		cands[best].DeltaLen = int64(recOverhead + len(z))
	}
	return nil
}

// fullRec is the fulltext form of a revision, when known: the existing
// record to copy, or a compressed payload.
type fullRec struct {
	raw     []byte
	payload []byte
	flags   byte
}

// fullLen sets t.FullLen: the existing fulltext record's exact size (not
// for one compressed at the fast level: index.FlagFastZstd, which is
// recompressed), an estimate the best delta is clearly below (see
// fullMargin), or the compressed text's.
func (rp *repacker) fullLen(fw *fileWork, e index.Entry, text []byte, t *Target, cands []prepared) (fullRec, error) {
	var f fullRec
	if e.Kind == index.KindFull && e.Flags&index.FlagFastZstd == 0 {
		var err error
		f.raw, err = rp.rawRecord(&e)
		t.FullLen = uint64(len(f.raw))
		return f, err
	}
	est := fw.fullEstimate(e.Size)
	for _, c := range cands {
		if est > 0 && c.DeltaLen >= 0 && ChainRule(c.Candidate, *t, rp.caps) == "" && uint64(c.DeltaLen)*fullMargin < est {
			t.FullLen = est
			return f, nil
		}
	}
	f.payload, f.flags = rp.fullPayload(text)
	t.FullLen = uint64(recOverhead + len(f.payload))
	fw.ratio = float64(t.FullLen) / float64(max(len(text), 1))
	return f, nil
}

// preferExisting keeps the existing delta unless the choice is clearly
// smaller (reuseMargin).
func preferExisting(d Decision, cands []prepared) Decision {
	if d.Choice < 0 || cands[d.Choice].Role == RoleCarried {
		return d
	}
	for i, c := range cands {
		if c.Role == RoleCarried && d.Tried[i].Reason == RuleNotSmallest &&
			float64(cands[d.Choice].DeltaLen) > reuseMargin*float64(c.DeltaLen) {
			d.Tried[d.Choice].Reason = "not clearly smaller than the existing delta"
			d.Tried[i].Reason = ""
			d.Choice, d.Intermediate = i, false
			return d
		}
	}
	return d
}

// build makes the new entry and its record from the decision.
func (rp *repacker) build(e index.Entry, text []byte, cands []prepared, d Decision, full fullRec) (index.Entry, []byte, outcome, error) {
	ne := e
	if text != nil || e.Size == 0 {
		// A revision put from a delta alone has no content hash yet; the
		// text is at hand here, so it gets one.
		ne = rp.live.WithContentHash(e, text)
	}
	ne.Base2 = index.NullRev
	if d.Choice < 0 {
		ne.Kind, ne.Base, ne.ChainLen, ne.ChainBytes = index.KindFull, index.NullRev, 0, 0
		if full.raw != nil {
			ne.ChainBytes = uint64(len(full.raw))
			return ne, full.raw, outUnchanged, nil
		}
		if full.payload == nil {
			full.payload, full.flags = rp.fullPayload(text)
		}
		return rp.fresh(ne, full.payload, full.flags)
	}
	c := &cands[d.Choice]
	be, err := rp.shadow.entry(c.Base)
	if err != nil {
		return index.Entry{}, nil, 0, err
	}
	if c.Role == RoleCarried {
		raw, err := rp.rawRecord(&e)
		return reusedEntry(e, be), raw, outReused, err
	}
	ne.Kind, ne.Base = kindOf(c.Role, d.Intermediate), c.Base
	ne.ChainLen, ne.ChainBytes = be.ChainLen+1, be.ChainBytes
	if c.Role == RoleP1P2 {
		if err := rp.liveFormat(formatTwoBase); err != nil {
			return index.Entry{}, nil, 0, err
		}
		ne.Base2, ne.ChainLen, ne.ChainBytes = c.Base2, c.BaseChainLen+1, c.BaseChainBytes
	}
	return rp.fresh(ne, c.payload, c.flags)
}

// fullPayload compresses text as repack stores a fulltext: from bigFull
// bytes chunked, each chunk a zstd frame (so that it is read a group of
// chunks at a time), else one zstd stream.
func (rp *repacker) fullPayload(text []byte) ([]byte, byte) {
	if len(text) >= bigFull {
		return compressBigWith(rp.live.fenc, text)
	}
	return compressWith(rp.live.fenc, text)
}

// fresh makes a new record for ne with payload.
func (rp *repacker) fresh(ne index.Entry, payload []byte, flags byte) (index.Entry, []byte, outcome, error) {
	if flags&recFlagChunked != 0 {
		// A store older than chunked records is marked as holding them
		// before it does, as a put marks it (an older build then refuses
		// it rather than misread them).
		if err := rp.liveFormat(formatChunked); err != nil {
			return index.Entry{}, nil, 0, err
		}
	}
	// Only the record's own bits change; any other entry flag is kept.
	ne.Flags = ne.Flags&^(index.Flags(recFlagsAll)|index.FlagFastZstd) | index.Flags(flags)
	rec := appendRecord(nil, recHeader{Flags: flags, ID: ne.ID(), TextLen: ne.Size}, payload)
	ne.Stored = uint32(len(rec))
	ne.ChainBytes += uint64(len(rec))
	return ne, rec, outRedelta, nil
}

// similarFiles indexes every file's latest revision by base name and by
// size class: git's name-hash ordering in spirit, so a file's first
// revision can delta against a file of the same name or size elsewhere in
// the store. It is consulted only when nothing in the file itself passes.
//
// It is built before the jobs start, and a file is offered only the
// nearest file with a lower id under each key, waited for if still being
// repacked when its delta could be chosen (see similarCandidates): the
// choice is the same whatever the jobs and their timing, as if the files
// were repacked one after another in id order. (A table filled as files finish offered whichever file finished
// last, so the same store repacked to different sizes from run to run.)
// It holds one RevID per file, as the job list holds a name per file.
type similarFiles struct {
	byName map[string][]index.RevID // ascending file ids
	bySize map[int][]index.RevID
}

func sizeClass(n uint64) int { return bits.Len64(n) }

// similarTable indexes the latest stored revision of each file in jobs,
// which are in ascending id order. A latest revision gc removes is left
// out, and so is a file with none left.
func (rp *repacker) similarTable(jobs []fileJob) (*similarFiles, error) {
	sf := &similarFiles{byName: map[string][]index.RevID{}, bySize: map[int][]index.RevID{}}
	for _, j := range jobs {
		// Not revision Revs-1: gc leaves gaps, and may have removed a
		// deleted file's revisions all.
		e, ok, err := rp.live.idx.Latest(j.id)
		if err != nil {
			return nil, err
		}
		id := e.ID()
		if !ok || rp.opt.keep != nil && !rp.opt.keep.keeps(id) {
			continue
		}
		if j.meta.Name != "" {
			name := path.Base(j.meta.Name)
			sf.byName[name] = append(sf.byName[name], id)
		}
		sf.bySize[sizeClass(e.Size)] = append(sf.bySize[sizeClass(e.Size)], id)
	}
	return sf, nil
}

// before returns the revision in ids (ascending file ids) of the nearest
// file below f.
func before(ids []index.RevID, f index.FileID) (index.RevID, bool) {
	i, _ := slices.BinarySearchFunc(ids, f, func(id index.RevID, f index.FileID) int { return cmp.Compare(id.File, f) })
	if i == 0 {
		return index.NullRev, false
	}
	return ids[i-1], true
}

// similarCandidates returns up to two revisions of other files to try:
// the latest of the nearest file below fw's of the same base name, and of
// the same size class. Their texts are the live store's, so the deltas are
// computed without waiting for those files; their chain facts are filled
// in from the shadow (waiting for the file) only for a delta small enough
// to be chosen (see widen): most similar files of a store of many small
// files are no base at all, and waiting for each would run the jobs one
// after another.
func (rp *repacker) similarCandidates(fw *fileWork, size uint64, tried []prepared) []prepared {
	var ids []index.RevID
	if fw.name != "" {
		if id, ok := before(rp.similar.byName[path.Base(fw.name)], fw.id); ok {
			ids = append(ids, id)
		}
	}
	if id, ok := before(rp.similar.bySize[sizeClass(size)], fw.id); ok {
		ids = append(ids, id)
	}
	seen := map[index.RevID]bool{}
	for _, c := range tried {
		seen[c.Base] = true
	}
	var out []prepared
	for _, id := range ids {
		be, err := rp.live.resolve(id)
		if err != nil || be.File > fw.id || seen[be.ID()] || be.Lost() || rp.salv.isLost(be.ID()) {
			continue // a dedup of a higher file's revision: see doneEntry; or no text
		}
		seen[be.ID()] = true
		out = append(out, prepared{Candidate: Candidate{Role: RoleHint, Base: be.ID(), DeltaLen: -1}})
	}
	return out
}
