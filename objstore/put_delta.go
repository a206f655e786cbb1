package objstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// ErrNeedFulltext is returned by a delta-only put (PutRequest.DeltaOnly) that the store cannot take from the delta alone: appending it
// to its base's chain would break a cap, or it is not clearly smaller than
// the text. The caller puts the fulltext instead.
var ErrNeedFulltext = errors.New("objstore: this revision needs its fulltext")

// putDelta stores a revision from req.Delta alone: a CodecCopy delta
// against req.P1 producing req.Size bytes. Its cost follows the delta, not
// the text: nothing is rebuilt, hashed or compared. The store checks what
// it can without the text (the delta's lengths against the base and
// req.Size, its instruction stream, the chain caps) and records the entry
// with index.FlagHashDeferred and Hash 0. Dedup never finds it.
func (s *Store) putDelta(ctx context.Context, req PutRequest) (index.Entry, error) {
	e, commit, err := s.PutDeltaNoWait(ctx, req)
	if err != nil {
		return index.Entry{}, err
	}
	return e, commit()
}

// PutDeltaNoWait is Put of a DeltaOnly request returning once the record
// is appended, before it is durable: commit makes it durable, in a group
// commit shared with the puts appended meanwhile (see PutNoWait).
func (s *Store) PutDeltaNoWait(ctx context.Context, req PutRequest) (index.Entry, func() error, error) {
	if !req.DeltaOnly {
		return index.Entry{}, nil, errors.New("objstore: PutDeltaNoWait of a put that is not delta-only")
	}
	if err := ctx.Err(); err != nil {
		return index.Entry{}, nil, err
	}
	s.wmu.Lock()
	e, meta, err := s.prepareDelta(&req)
	if err != nil {
		s.wmu.Unlock()
		return index.Entry{}, nil, fmt.Errorf("objstore: put file %d from a delta: %w", req.File, err)
	}
	b := s.enqueue(e, meta)
	// The base's text may be cached as the file's latest; the new text is
	// not at hand, so nothing replaces it (a fallback put rebuilds it).
	s.latest.remove(req.P1)
	s.wmu.Unlock()
	return e, func() error { return s.wait(b) }, nil
}

// prepareDelta checks req and appends its record. Called with wmu held.
func (s *Store) prepareDelta(req *PutRequest) (index.Entry, index.FileMeta, error) {
	if err := s.canPut(); err != nil {
		return index.Entry{}, index.FileMeta{}, err
	}
	if req.Data != nil || req.P1.IsNull() || req.DeltaBase != req.P1 || !req.P2.IsNull() {
		return index.Entry{}, index.FileMeta{}, errors.New("a delta-only put needs no Data, DeltaBase == P1 and no P2")
	}
	meta, err := s.nextRevMeta(req.File)
	if err != nil {
		return index.Entry{}, index.FileMeta{}, err
	}
	be, err := s.resolve(req.P1)
	if err != nil {
		return index.Entry{}, index.FileMeta{}, fmt.Errorf("parent %v: %w", req.P1, err)
	}
	if err := checkDeltaOnly(req, be.Size); err != nil {
		return index.Entry{}, index.FileMeta{}, err
	}
	c := prepared{Candidate: candidateOf(RoleP1, be)}
	c.payload, c.flags = s.compress(req.Delta)
	c.flags |= recFlagDelta
	c.DeltaLen = int64(recOverhead + len(c.payload))
	t := Target{TextLen: req.Size, FullLen: s.fullBound(req.File, req.Size)}
	if r := rule(c.Candidate, t, s.caps); r != "" {
		return index.Entry{}, index.FileMeta{}, fmt.Errorf("%w: %s", ErrNeedFulltext, r)
	}
	e := index.Entry{File: req.File, Rev: index.Rev(meta.Revs), P1: req.P1, Kind: index.KindP1, Base: be.ID(),
		ChainLen: be.ChainLen + 1, ChainBytes: be.ChainBytes, Size: req.Size, Time: revTime(req)}
	if err := s.appendEntry(&e, c.flags, c.payload); err != nil {
		return index.Entry{}, index.FileMeta{}, err
	}
	e.Flags |= index.FlagHashDeferred
	meta.Revs++
	named(meta, req)
	return e, *meta, nil
}

// checkDeltaOnly checks what a delta-only put can be checked for without
// any text: a CodecCopy delta from baseLen bytes to req.Size bytes whose
// every instruction stays within its base and target.
func checkDeltaOnly(req *PutRequest, baseLen uint64) error {
	c, bl, tl, err := delta.Header(req.Delta)
	switch {
	case err != nil:
		return err
	case c != delta.CodecCopy:
		return fmt.Errorf("a delta-only put takes a %v delta, not %v", delta.CodecCopy, c)
	case bl != baseLen:
		return fmt.Errorf("delta against %d bytes, base %v has %d", bl, req.P1, baseLen)
	case tl != req.Size:
		return fmt.Errorf("delta produces %d bytes, request says %d", tl, req.Size)
	}
	return delta.Validate(req.Delta, baseLen)
}

// fullBound is what the fulltext of n bytes is taken to cost when it cannot
// be compressed to find out: the estimate from the file's last measured
// ratio, or n itself (a delta-only put must then at least beat the raw text).
func (s *Store) fullBound(f index.FileID, n uint64) uint64 {
	if ratio, ok := s.ratios[f]; ok {
		return uint64(recOverhead + ratio*float64(n))
	}
	return recOverhead + n
}

// WithContentHash returns e with the content hash of its text filled in and
// index.FlagHashDeferred cleared; e is returned unchanged if it has its
// hash. Repack, which rebuilds every text it rewrites, uses it so that a
// rewritten revision carries a content hash again. text must be e's text.
func (s *Store) WithContentHash(e index.Entry, text []byte) index.Entry {
	if e.Flags&index.FlagHashDeferred == 0 {
		return e
	}
	s.hashedBytes.Add(int64(len(text)))
	e.Hash, e.Flags = s.cfg.hash(text), e.Flags&^index.FlagHashDeferred
	return e
}
