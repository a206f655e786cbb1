package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
	"github.com/klauspost/compress/zstd"
)

// prepared is a candidate with the payload it would store.
type prepared struct {
	Candidate
	payload []byte
	flags   byte
}

// store picks the base, appends the record and fills in e. wmu held.
// Parents, hints and a carried delta are tried first; the file's snapshots
// only when none of those passes (their deltas span more history, so they
// cost more to compute and are rarely the smallest).
//
// The fulltext is compressed only when its size decides (see estimateFull):
// when a parent's chain is full, the file's snapshots are tried against the
// estimate first, so a chain break that ends in an intermediate snapshot
// costs a delta, not a compression of the whole text (M6: 4 of 5 chain
// breaks of an 8 MiB text, ~75 ms each).
func (s *Store) store(ctx context.Context, e *index.Entry, req *PutRequest, meta *index.FileMeta, data []byte) error {
	t := Target{TextLen: uint64(len(data))}
	cands, err := s.candidates(req)
	if err != nil {
		return err
	}
	if err := s.computeAll(ctx, cands, req, data, t); err != nil {
		return err
	}
	if two, ok, err := s.twoBase(ctx, cands, data, t); err != nil {
		return err
	} else if ok {
		cands = append(cands, two)
	}
	full, fullFlags := []byte(nil), byte(0)
	compressed := func() {
		if full == nil {
			full, fullFlags, t.FullLen = s.compressFull(e.File, data)
		}
	}
	if t.FullLen = s.estimateFull(e.File, len(data), plainOf(cands)); t.FullLen == 0 && (!meta.HasSnap || anyChainPasses(cands, t, s.caps)) {
		compressed()
	}
	d := SelectBase(t, plainOf(cands), s.caps)
	if d.Choice < 0 && meta.HasSnap {
		snaps, err := s.snapshotCandidates(index.RevID{File: e.File, Rev: meta.LastSnap}, cands)
		if err != nil {
			return err
		}
		if err := s.computeSnapshots(ctx, snaps, data, t); err != nil {
			return err
		}
		cands = append(cands, snaps...)
		if full == nil {
			if t.FullLen = s.estimateFull(e.File, len(data), plainOf(cands)); t.FullLen == 0 {
				compressed()
			}
		}
		d = SelectBase(t, plainOf(cands), s.caps)
	}
	if d.Choice < 0 {
		compressed()
	}
	payload, flags := full, fullFlags
	e.Kind = index.KindFull
	if d.Choice >= 0 {
		c := &cands[d.Choice]
		payload, flags = c.payload, c.flags
		e.Kind, e.Base, e.ChainLen = kindOf(c.Role, d.Intermediate), c.Base, c.BaseChainLen+1
		e.ChainBytes, e.Base2 = c.BaseChainBytes, c.Base2
	}
	if e.Kind == index.KindP1P2 {
		if err := s.needFormat(formatTwoBase); err != nil {
			return err
		}
	}
	if err := s.appendEntry(e, flags, payload); err != nil {
		return err
	}
	if e.Kind == index.KindFull && s.cfg.FastFulltexts && len(data) < bigFull {
		e.Flags |= index.FlagFastZstd
	}
	return nil
}

// anyChainPasses reports whether some candidate's chain leaves room for it.
func anyChainPasses(cands []prepared, t Target, caps Caps) bool {
	for i := range cands {
		if ChainRule(cands[i].Candidate, t, caps) == "" {
			return true
		}
	}
	return false
}

func (s *Store) appendEntry(e *index.Entry, flags byte, payload []byte) error {
	if flags&recFlagChunked != 0 {
		if err := s.needFormat(formatChunked); err != nil {
			return err
		}
	}
	head, tail := recordParts(recHeader{Flags: flags, ID: e.ID(), TextLen: e.Size}, payload)
	seg, off, err := s.segs.append(head, payload, tail)
	if err != nil {
		return err
	}
	n := len(head) + len(payload) + len(tail)
	e.Seg, e.Off, e.Stored, e.Flags = seg, off, uint32(n), index.Flags(flags)
	e.ChainBytes += uint64(n)
	return nil
}

func plainOf(cands []prepared) []Candidate {
	plain := make([]Candidate, len(cands))
	for i := range cands {
		plain[i] = cands[i].Candidate
	}
	return plain
}

// computeAll computes the candidates' deltas. A carried delta goes first;
// once it verifies, no delta of our own is computed against the same base:
// what the caller already has is reused, not recomputed.
func (s *Store) computeAll(ctx context.Context, cands []prepared, req *PutRequest, data []byte, t Target) error {
	covered := map[index.RevID]bool{}
	for _, carried := range []bool{true, false} {
		for i := range cands {
			c := &cands[i]
			if (c.Role == RoleCarried) != carried || !carried && covered[c.Base] {
				continue
			}
			if err := s.computeDelta(ctx, c, req, data, t); err != nil {
				return err
			}
			if carried && c.DeltaLen >= 0 {
				covered[c.Base] = true
			}
		}
	}
	return nil
}

// computeSnapshots computes the deltas against the snapshot candidates
// (newest first, each built on the next) root first, through putCaches:
// each text is rebuilt from the one before it, so a snapshot chain costs one
// decompression and one delta per level, and the read cache is left alone.
func (s *Store) computeSnapshots(ctx context.Context, snaps []prepared, data []byte, t Target) error {
	local := s.putCaches()
	for i := len(snaps) - 1; i >= 0; i-- {
		c := &snaps[i]
		if ChainRule(c.Candidate, t, s.caps) != "" {
			continue
		}
		e, err := s.entry(c.Base)
		if err != nil {
			return fmt.Errorf("snapshot %v: %w", c.Base, err)
		}
		base, err := s.rebuild(ctx, c.Base, e, local)
		if errors.Is(err, ErrCorrupt) {
			s.skipCorrupt(c, c.Base.File, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("snapshot %v: %w", c.Base, err)
		}
		c.payload, c.flags = s.encodeDelta(base, data, snapshotZstdLevel)
		c.DeltaLen = int64(recOverhead + len(c.payload))
	}
	return nil
}

// compressFull compresses the fulltext and remembers the file's ratio.
func (s *Store) compressFull(f index.FileID, data []byte) ([]byte, byte, uint64) {
	full, flags := []byte(nil), byte(0)
	if len(data) >= bigFull {
		full, flags = compressBig(data)
	} else {
		full, flags = compressWith(s.fenc, data)
	}
	n := uint64(recOverhead + len(full))
	s.ratios[f] = float64(n) / float64(max(len(data), 1))
	return full, flags, n
}

// maxSnapDepth bounds the walk down a snapshot chain; fitsDepth makes
// deeper snapshots useless anyway.
const maxSnapDepth = 64

// snapshotCandidates lists the latest snapshot and the snapshots it is built
// on, down to the fulltext, skipping bases already tried.
func (s *Store) snapshotCandidates(last index.RevID, tried []prepared) ([]prepared, error) {
	seen := map[index.RevID]bool{}
	for _, c := range tried {
		seen[c.Base] = true
	}
	var out []prepared
	for id := last; len(out) < maxSnapDepth; {
		e, err := s.entry(id)
		if err != nil {
			return nil, fmt.Errorf("snapshot %v: %w", id, err)
		}
		if e.Lost() {
			break // a salvage left no snapshot here (it keeps none on a lost one)
		}
		if !e.Kind.IsSnapshot() {
			return nil, fmt.Errorf("snapshot %v: %w: stored as %v", id, ErrCorrupt, e.Kind)
		}
		if !seen[id] {
			out = append(out, prepared{Candidate: candidateOf(RoleSnapshot, e)})
		}
		if e.Kind == index.KindFull {
			break
		}
		id = e.Base
	}
	return out, nil
}

func candidateOf(r Role, be index.Entry) Candidate {
	return Candidate{Role: r, Base: be.ID(), BaseChainLen: be.ChainLen, BaseChainBytes: be.ChainBytes,
		BaseIsSnapshot: be.Kind.IsSnapshot(), DeltaLen: -1}
}

// fullMargin: the compressed fulltext is estimated from the file's last
// measured compression ratio, and trusted only when the best delta is under
// a quarter of the estimate. Compressing an 8 MiB text costs ~60 ms here
// (BenchmarkPutSmallEdits before this rule), far more than the few-byte
// delta of a small edit; a file's compressibility does not change 4x between
// two revisions a small delta apart.
const fullMargin = 4

// estimateFull returns an estimate of the stored fulltext size that the
// best computable delta is clearly below, or 0 to say "compress it".
func (s *Store) estimateFull(f index.FileID, n int, cands []Candidate) uint64 {
	ratio, ok := s.ratios[f]
	if !ok {
		return 0
	}
	est := uint64(recOverhead + ratio*float64(n))
	for _, c := range cands {
		if c.DeltaLen >= 0 && ChainRule(c, Target{TextLen: uint64(n)}, s.caps) == "" &&
			uint64(c.DeltaLen)*fullMargin < est {
			return est
		}
	}
	return 0
}

func kindOf(r Role, intermediate bool) index.BaseKind {
	switch r {
	case RoleP1:
		return index.KindP1
	case RoleP2:
		return index.KindP2
	case RoleCarried:
		return index.KindReused
	case RoleHint:
		return index.KindHint
	case RoleP1P2:
		return index.KindP1P2
	}
	if intermediate {
		return index.KindIntermediate
	}
	return index.KindSnapshot
}

// candidates lists the distinct parent, carried and hint bases to try, with
// their chain facts.
func (s *Store) candidates(req *PutRequest) ([]prepared, error) {
	type want struct {
		role Role
		id   index.RevID
	}
	wants := []want{{RoleP1, req.P1}}
	if !s.cfg.P1Only {
		wants = append(wants, want{RoleP2, req.P2})
		if req.Delta != nil {
			wants = append(wants, want{RoleCarried, req.DeltaBase})
		}
		for _, h := range req.Hints {
			wants = append(wants, want{RoleHint, h})
		}
	}
	var out []prepared
	seen := map[index.RevID]bool{}
	for _, w := range wants {
		if w.id.IsNull() {
			continue
		}
		be, err := s.resolve(w.id)
		if err != nil {
			return nil, fmt.Errorf("%v base %v: %w", w.role, w.id, err)
		}
		if be.Lost() {
			continue // no text to take a delta against
		}
		if w.role != RoleCarried {
			if seen[be.ID()] {
				continue
			}
			seen[be.ID()] = true
		}
		out = append(out, prepared{Candidate: candidateOf(w.role, be)})
	}
	return out, nil
}

// resolve returns the entry of id, following a dedup to the revision that
// holds the data, so that every delta base has data of its own.
func (s *Store) resolve(id index.RevID) (index.Entry, error) {
	e, err := s.entry(id)
	if err != nil || e.Kind != index.KindDedup {
		return e, err
	}
	return s.entry(e.Base)
}

// computeDelta fills in c's payload and DeltaLen, unless its chain already
// breaks the caps (then no time is spent on it).
func (s *Store) computeDelta(ctx context.Context, c *prepared, req *PutRequest, data []byte, t Target) error {
	if ChainRule(c.Candidate, t, s.caps) != "" {
		return nil
	}
	base, err := s.fulltext(ctx, c.Base)
	if errors.Is(err, ErrCorrupt) {
		s.skipCorrupt(c, req.File, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%v base %v: %w", c.Role, c.Base, err)
	}
	if c.Role == RoleCarried {
		s.carried(c, base, req.Delta, data)
		return nil
	}
	c.payload, c.flags = s.encodeDelta(base, data, deltaZstdLevel)
	c.DeltaLen = int64(recOverhead + len(c.payload))
	return nil
}

// skipCorrupt leaves out candidate c, whose base text cannot be read
// because a record of its chain is bad: its delta stays uncomputed
// (RuleNotComputed), so the put chooses among the other candidates or
// stores a fulltext. Only the base choice changes: the new revision's
// content is the caller's, and no record of the bad chain is read for it.
// Insisting on the base would refuse every later revision of the file
// (and every snapshot of the tree that records it).
func (s *Store) skipCorrupt(c *prepared, f index.FileID, err error) {
	s.log.Warn("put: delta base unreadable, skipped", "file", f, "base", c.Base, "role", c.Role, "err", err)
	c.payload, c.DeltaLen = nil, -1
}

// carried accepts the caller's delta if it really turns base into data.
func (s *Store) carried(c *prepared, base, d, data []byte) {
	got, err := delta.Apply(base, d)
	if err != nil || !bytes.Equal(got, data) {
		s.log.Debug("carried delta rejected", "base", c.Base, "err", err)
		return
	}
	c.payload, c.flags = d, recFlagDelta
	if codec, _, _, _ := delta.Header(d); codec == delta.CodecCopy {
		c.payload, c.flags = s.compress(d)
		c.flags |= recFlagDelta
	}
	c.DeltaLen = int64(recOverhead + len(c.payload))
}

// Levels of the zstd-dictionary codec (zstd.EncoderLevel: 2 default, 3
// better). A delta against a parent gets the default level: it is tried
// on every put whose copy delta is over zstdTryMin. A delta against a
// snapshot is computed only when no parent passes the caps (once per
// ~128 revisions of a file) and becomes the root of the next chain
// (intermediate snapshot), read by every revision on it; it carries all
// the changes since that snapshot, and the better level's larger tables
// find more of them. On S2's 200 KiB text its intermediate snapshots
// shrink 10% (11.2 to 10.1 KB) for ~3 ms more each; on 1 MiB of text
// with 300 scattered edits, 32.4 KB to 21.0 KB, and on 4 MiB, where the
// default level's fixed tables lose the long matches, 860 KB to 28.9 KB.
// The best level (4) takes another 6% off S2's for 5-10x the time and
// 32 MiB of tables per call.
const (
	deltaZstdLevel    = 2
	snapshotZstdLevel = 3
)

// encodeDelta returns the smaller of the two codecs' payloads, the
// zstd-dictionary one at zstd level level.
func (s *Store) encodeDelta(base, target []byte, level int) ([]byte, byte) {
	p, flags := s.compress(delta.Encode(base, target))
	if len(p) > zstdTryMin && len(base) <= zstdTryMaxBase {
		if z, err := delta.EncodeZstd(base, target, level); err == nil && len(z) < len(p) {
			p, flags = z, 0
		}
	}
	return p, flags | recFlagDelta
}

// compress returns b zstd-compressed if that is smaller, else b itself.
func (s *Store) compress(b []byte) ([]byte, byte) {
	switch {
	case len(b) <= smallDelta:
		return compressWith(s.senc, b)
	case len(b) >= bigDelta:
		return compressFrames(b)
	}
	return compressWith(s.enc, b)
}

// smallDelta is the payload size up to which deltas get zstd's better level
// with a small window. Most deltas of small edits are a few hundred bytes to
// a few KiB, where that level costs well under a millisecond and, measured on
// the D1/D4 delta workloads, stores 5-20% less than the default level (D2:
// 375 -> 298 bytes, D4: 10.9 -> 8.7 KB over 20 revisions), within 0.3% of
// the best level, whose tables cost 34 MiB of memory against 4 MiB.
const smallDelta = 64 << 10

func compressWith(enc *zstd.Encoder, b []byte) ([]byte, byte) {
	if len(b) < 64 {
		return b, 0
	}
	z := enc.EncodeAll(b, make([]byte, 0, len(b)/2))
	if len(z) < len(b) {
		return z, recFlagZstd
	}
	return b, 0
}
