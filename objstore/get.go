package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// Get returns the fulltext of revision id. The slice is the caller's.
func (s *Store) Get(ctx context.Context, id index.RevID) ([]byte, error) {
	e, err := s.entry(id)
	if err != nil {
		return nil, fmt.Errorf("objstore: get %v: %w", id, err)
	}
	text, owned, err := s.rebuildOwned(ctx, id, e, caches{latest: s.latest, full: s.cache})
	if err != nil {
		return nil, err
	}
	if owned {
		return text, nil // built for this call and cached nowhere: no copy
	}
	return bytes.Clone(text), nil
}

// Entry returns the index entry of revision id.
func (s *Store) Entry(id index.RevID) (index.Entry, error) { return s.entry(id) }

// fulltext returns id's text, shared with the caches: never modify it. A
// cached text is returned without looking its entry up (an index read
// costs more than the cache lookup; repack asks for each base's text many
// times).
func (s *Store) fulltext(ctx context.Context, id index.RevID) ([]byte, error) {
	c := caches{latest: s.latest, full: s.cache}
	if t, ok := c.get(id); ok {
		return t, nil
	}
	e, err := s.entry(id)
	if err != nil {
		return nil, fmt.Errorf("objstore: get %v: %w", id, err)
	}
	return s.rebuild(ctx, id, e, c)
}

// fulltextOf is fulltext for a caller that holds the revision's entry.
func (s *Store) fulltextOf(ctx context.Context, e index.Entry) ([]byte, error) {
	return s.rebuild(ctx, e.ID(), e, caches{latest: s.latest, full: s.cache})
}

// caches are the texts a rebuild may start from; latest and shared may be
// nil. Rebuilt texts go to full; shared is only looked in.
type caches struct {
	latest, full, shared *lru[index.RevID]
}

func (c caches) get(id index.RevID) ([]byte, bool) {
	for _, l := range []*lru[index.RevID]{c.latest, c.full, c.shared} {
		if l == nil {
			continue
		}
		if t, ok := l.get(id); ok {
			return t, true
		}
	}
	return nil, false
}

// putCaches are the caches of a rebuild a put needs for itself (a dedup
// candidate, the snapshot candidates): it starts from any cached text, but
// what it rebuilds goes to a cache of its own that keeps only the last text,
// dropped with the put. A dedup candidate's text is about to be the file's
// latest anyway, and snapshot texts are what readers of recent revisions
// never ask for: filled from puts, the read cache held every snapshot text
// of S1's 8 MiB file (4 x 8 MiB) after an ingest, all of it in the peak RSS.
func (s *Store) putCaches() caches {
	own := newLRU[index.RevID](1)
	own.keepOne = true
	return caches{latest: s.latest, full: own, shared: s.cache}
}

// rebuild reads e's chain in file order, applies it and checks the result
// against e.Hash. want names the revision asked for, for error messages.
func (s *Store) rebuild(ctx context.Context, want index.RevID, e index.Entry, cache caches) ([]byte, error) {
	text, _, err := s.rebuildOwned(ctx, want, e, cache)
	return text, err
}

// rebuildOwned is rebuild, also reporting whether the text was built by
// this call and kept by no cache, so the caller may have it without a copy.
func (s *Store) rebuildOwned(ctx context.Context, want index.RevID, e index.Entry, cache caches) ([]byte, bool, error) {
	if t, ok := cache.get(e.ID()); ok {
		return t, false, nil
	}
	if t, ok, err := s.salvageText(e.ID()); ok {
		return t, true, err
	}
	e, err := s.dataEntry(want, e)
	if err != nil {
		return nil, false, err
	}
	if t, ok := cache.get(e.ID()); ok {
		return t, false, nil
	}
	if t, ok, err := s.salvageText(e.ID()); ok {
		return t, true, err
	}
	s.rebuiltBytes.Add(int64(e.Size))
	chain, start, err := s.chain(want, e, cache)
	if errors.Is(err, errGraph) {
		return s.readGraph(ctx, want, e, cache)
	}
	if err != nil {
		return nil, false, err
	}
	payloads, err := s.readChain(ctx, want, chain)
	if err != nil {
		return nil, false, err
	}
	rootCached := false
	if start == nil && len(chain) > 1 {
		if rootCached, err = s.cacheRoot(want, &chain[len(chain)-1], payloads[len(chain)-1], cache); err != nil {
			return nil, false, err
		}
	}
	ownRoot := start == nil && len(chain) > 1 && !rootCached
	text, spare, err := s.applyChain(want, chain, payloads, start, ownRoot)
	if err != nil {
		return nil, false, err
	}
	if err := s.checkHash(want, &e, text); err != nil {
		return nil, false, err
	}
	s.putBuf(spare)
	if root := payloads[len(chain)-1]; ownRoot && !sameArray(root, text) {
		s.putBuf(root)
	}
	return text, !cache.full.add(e.ID(), text), nil
}

// dataEntry returns the entry whose record holds e's text: e's own, or
// for a dedup its target's, checked to be a revision with a record of
// e's content.
func (s *Store) dataEntry(want index.RevID, e index.Entry) (index.Entry, error) {
	if e.Kind != index.KindDedup {
		return e, nil
	}
	te, err := s.entry(e.Base)
	if err != nil || te.Kind == index.KindDedup || te.Hash != e.Hash || te.Size != e.Size {
		return index.Entry{}, corrupt(want, &e, fmt.Errorf("bad dedup target %v: %v", e.Base, err))
	}
	return te, nil
}

// checkHash checks a rebuilt text against e's content hash. A revision
// stored from a delta alone has none (index.FlagHashDeferred): its chain's
// record checksums, checked by readRecord, are what vouch for it.
func (s *Store) checkHash(want index.RevID, e *index.Entry, text []byte) error {
	if e.Flags&index.FlagHashDeferred != 0 {
		return nil
	}
	s.hashedBytes.Add(int64(len(text)))
	if s.cfg.hash(text) != e.Hash {
		return corrupt(want, e, errors.New("content hash mismatch"))
	}
	return nil
}

// cacheRoot checks the chain's fulltext and caches it: neighbouring
// revisions usually share it, and reading a history backwards would
// otherwise read and decompress it again for every revision. It reports
// whether the cache kept it.
func (s *Store) cacheRoot(want index.RevID, root *index.Entry, text []byte, cache caches) (bool, error) {
	if err := s.checkHash(want, root, text); err != nil {
		return false, err
	}
	return cache.full.add(root.ID(), text), nil
}

// getBuf returns an empty buffer of capacity n or more, recycled if it can.
// Reads with the cache off or full would otherwise allocate three or four
// texts each (the root's decompressed text, two apply buffers, the copy for
// the caller): on S3 (1 MiB texts, cache off) that was 1.8 garbage
// collections per read and 13% of the read time.
//
// A recycled buffer is taken only if it is at most twice n (or bufSlack):
// a rebuilt text may go to the fulltext cache, which keeps its whole
// array, and a few KiB text in a MiB buffer pinned the MiB.
func (s *Store) getBuf(n uint64) []byte {
	if p, ok := s.bufs.Get().(*[]byte); ok && uint64(cap(*p)) >= n && uint64(cap(*p)) <= max(2*n, bufSlack) {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// bufSlack is the largest recycled buffer getBuf hands out for any small
// text.
const bufSlack = 16 << 10

// putBuf recycles b, which nothing may use afterwards. sync.Pool drops
// what is not reused within two collections, so idle buffers do not stay.
//
// A buffer of a big text (bigFull or more) is not kept: the pool would pin
// hundreds of MiB until two collections later, which on an idle mount can
// be minutes, and the rare next read of such a text can afford its own.
func (s *Store) putBuf(b []byte) {
	if cap(b) > 0 && cap(b) < bigFull {
		s.bufs.Put(&b)
	}
}

// maxChainWalk bounds a chain walk whatever the index says, so a corrupt
// entry cannot send a read round a cycle for billions of steps.
const maxChainWalk = 1 << 20

// chain walks from e towards its fulltext, stopping early at a cached text.
// It returns the entries newest first and the cached start text, if any,
// or errGraph if it meets a two-base record (see graph.go).
func (s *Store) chain(want index.RevID, e index.Entry, cache caches) ([]index.Entry, []byte, error) {
	chain := []index.Entry{e}
	for cur := e; cur.Kind != index.KindFull; {
		if !cur.Base2.IsNull() {
			return nil, nil, errGraph
		}
		if uint64(len(chain)) > uint64(e.ChainLen)+1 || len(chain) > maxChainWalk {
			return nil, nil, corrupt(want, &cur, errors.New("chain longer than recorded"))
		}
		if t, ok := cache.get(cur.Base); ok {
			return chain, t, nil
		}
		if t, ok, err := s.salvageText(cur.Base); ok {
			return chain, t, err
		}
		be, err := s.entry(cur.Base)
		if err != nil {
			return nil, nil, corrupt(want, &cur, fmt.Errorf("base %v: %w", cur.Base, err))
		}
		if be.Kind == index.KindDedup {
			return nil, nil, corrupt(want, &cur, fmt.Errorf("base %v has no data of its own", cur.Base))
		}
		chain = append(chain, be)
		cur = be
	}
	return chain, nil, nil
}

// readChain reads every record of the chain, in segment order so the reads
// sweep forward through the files, and returns the decoded payloads indexed
// like chain.
func (s *Store) readChain(ctx context.Context, want index.RevID, chain []index.Entry) ([][]byte, error) {
	order := make([]int, len(chain))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := &chain[order[a]], &chain[order[b]]
		return x.Seg < y.Seg || x.Seg == y.Seg && x.Off < y.Off
	})
	payloads := make([][]byte, len(chain))
	for _, i := range order {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p, err := s.readRecord(want, &chain[i])
		if err != nil {
			return nil, err
		}
		payloads[i] = p
	}
	return payloads, nil
}

// readRecord reads and checks e's record, returning its decoded payload.
func (s *Store) readRecord(want index.RevID, e *index.Entry) ([]byte, error) {
	if err := lostCheck(want, e); err != nil {
		return nil, err
	}
	if e.Flags&index.FlagChunked != 0 && e.Flags&index.FlagDelta == 0 {
		return s.readChunked(want, e)
	}
	if e.Stored < recOverhead || e.Stored > recOverhead+maxPayload {
		return nil, corrupt(want, e, fmt.Errorf("index gives a record of %d bytes", e.Stored))
	}
	s.readRecords.Add(1)
	s.readBytes.Add(int64(e.Stored))
	raw, err := s.segs.readAt(e.Seg, e.Off, int(e.Stored))
	if errors.Is(err, errShort) {
		return nil, corrupt(want, e, err)
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: read %v for %v: %w", e.ID(), want, err)
	}
	h, p, err := decodeRecord(raw)
	if err != nil {
		return nil, corrupt(want, e, err)
	}
	if err := agree(&h, e); err != nil {
		return nil, corrupt(want, e, err)
	}
	if h.zstd() {
		var dst []byte
		if !h.delta() {
			dst = s.getBuf(e.Size) // a chain's root: recycled after the apply
		}
		if p, err = s.dec.DecodeAll(p, dst); err != nil {
			return nil, corrupt(want, e, fmt.Errorf("decompress: %w", err))
		}
	}
	if !h.delta() && uint64(len(p)) != e.Size {
		return nil, corrupt(want, e, fmt.Errorf("fulltext of %d bytes, index says %d", len(p), e.Size))
	}
	return p, nil
}

// agree checks that a record's header matches the index entry.
func agree(h *recHeader, e *index.Entry) error {
	switch {
	case h.ID != e.ID():
		return fmt.Errorf("record belongs to %v", h.ID)
	case h.TextLen != e.Size:
		return fmt.Errorf("record text length %d, index says %d", h.TextLen, e.Size)
	case index.Flags(h.Flags) != e.Flags.RecordFlags():
		return fmt.Errorf("record flags %#x, index says %#x", h.Flags, e.Flags)
	case h.delta() == (e.Kind == index.KindFull):
		return fmt.Errorf("record delta flag disagrees with kind %v", e.Kind)
	}
	return nil
}

// applyChain applies the payloads oldest first onto start (or the chain's
// fulltext when start is nil). It returns the text and a spare buffer the
// caller may recycle (nil if none). ownRoot says the chain's fulltext was
// read for this call alone: a delta that allows it is then applied over it
// in place (delta.ApplyInPlace), as is any later delta over a text this
// call built, so a read of a revision a few edits from an uncached big
// fulltext holds one text, not two (TestOldRevisionReadMemory: +208 MiB
// of heap for a 96 MiB file, now +112).
func (s *Store) applyChain(want index.RevID, chain []index.Entry, payloads [][]byte, start []byte, ownRoot bool) ([]byte, []byte, error) {
	text, i := start, len(chain)-1
	if text == nil {
		text, i = payloads[i], i-1
	}
	// Two buffers in turn: each step writes the next text into the one not
	// holding the current text, so a long chain allocates twice, not per step.
	// Both get the capacity of the largest text on the chain up front, or a
	// text that grows by a byte per revision would reallocate every step.
	var bufs [2][]byte
	var maxSize uint64
	for _, e := range chain[:i+1] {
		maxSize = max(maxSize, e.Size)
	}
	owned, k := ownRoot, 0
	for ; i >= 0; i-- {
		next, err := s.applyStep(&bufs[k], text, payloads[i], owned, maxSize)
		if err != nil {
			return nil, nil, corrupt(want, &chain[i], err)
		}
		if uint64(len(next)) != chain[i].Size {
			return nil, nil, corrupt(want, &chain[i], fmt.Errorf("delta gave %d bytes, index says %d", len(next), chain[i].Size))
		}
		if !sameArray(next, text) { // written into bufs[k]
			k ^= 1
		}
		text, owned = next, true
	}
	return text, bufs[k], nil // bufs[k^1] or the root holds text
}

// applyStep applies delta d to text: over text itself when the caller owns
// it and d allows it, else into *buf (allocated on first use).
func (s *Store) applyStep(buf *[]byte, text, d []byte, owned bool, maxSize uint64) ([]byte, error) {
	if owned {
		next, ok, err := delta.ApplyInPlace(text, d)
		if err != nil || ok {
			return next, err
		}
	}
	if *buf == nil {
		*buf = s.getBuf(maxSize)
	}
	next, err := delta.AppendApply((*buf)[:0], text, d)
	if err != nil {
		return nil, err
	}
	*buf = next
	return next, nil
}

// sameArray reports whether a and b start in the same memory.
func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}
