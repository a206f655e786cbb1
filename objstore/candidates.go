package objstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// prepared is a candidate with the payload it would store.
type prepared struct {
	Candidate
	payload []byte
	flags   byte
}

// store picks the base, appends the record and fills in e. wmu held.
func (s *Store) store(ctx context.Context, e *index.Entry, req *PutRequest, meta *index.FileMeta, data []byte) error {
	full, fullFlags := s.compress(data)
	t := Target{TextLen: uint64(len(data)), FullLen: uint64(recOverhead + len(full))}
	cands, err := s.candidates(req, meta, t)
	if err != nil {
		return err
	}
	for i := range cands {
		if err := s.computeDelta(ctx, &cands[i], req, data, t); err != nil {
			return err
		}
	}
	plain := make([]Candidate, len(cands))
	for i := range cands {
		plain[i] = cands[i].Candidate
	}
	d := SelectBase(t, plain, s.caps)
	payload, flags := full, fullFlags
	e.Kind = index.KindFull
	if d.Choice >= 0 {
		c := &cands[d.Choice]
		payload, flags = c.payload, c.flags
		e.Kind, e.Base, e.ChainLen = kindOf(c.Role, d.Intermediate), c.Base, c.BaseChainLen+1
		e.ChainBytes = c.BaseChainBytes
	}
	rec := appendRecord(nil, recHeader{Flags: flags, ID: e.ID(), TextLen: e.Size}, payload)
	seg, off, err := s.segs.append(rec)
	if err != nil {
		return err
	}
	e.Seg, e.Off, e.Stored, e.Flags = seg, off, uint32(len(rec)), index.Flags(flags)
	e.ChainBytes += uint64(len(rec))
	return nil
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
	}
	if intermediate {
		return index.KindIntermediate
	}
	return index.KindSnapshot
}

// candidates lists the distinct bases to try, with their chain facts.
func (s *Store) candidates(req *PutRequest, meta *index.FileMeta, t Target) ([]prepared, error) {
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
	if meta.HasSnap {
		wants = append(wants, want{RoleSnapshot, index.RevID{File: req.File, Rev: meta.LastSnap}})
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
		if w.role != RoleCarried {
			if seen[be.ID()] {
				continue
			}
			seen[be.ID()] = true
		}
		out = append(out, prepared{Candidate: Candidate{Role: w.role, Base: be.ID(),
			BaseChainLen: be.ChainLen, BaseChainBytes: be.ChainBytes,
			BaseIsSnapshot: be.Kind.IsSnapshot(), DeltaLen: -1}})
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
	if err != nil {
		return fmt.Errorf("%v base %v: %w", c.Role, c.Base, err)
	}
	if c.Role == RoleCarried {
		s.carried(c, base, req.Delta, data)
		return nil
	}
	c.payload, c.flags = s.encodeDelta(base, data)
	c.DeltaLen = int64(recOverhead + len(c.payload))
	return nil
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

// encodeDelta returns the smaller of the two codecs' payloads.
func (s *Store) encodeDelta(base, target []byte) ([]byte, byte) {
	p, flags := s.compress(delta.Encode(base, target))
	if len(p) > zstdTryMin && len(base) <= zstdTryMaxBase {
		if z, err := delta.EncodeZstd(base, target, 2); err == nil && len(z) < len(p) {
			p, flags = z, 0
		}
	}
	return p, flags | recFlagDelta
}

// compress returns b zstd-compressed if that is smaller, else b itself.
func (s *Store) compress(b []byte) ([]byte, byte) {
	if len(b) < 64 {
		return b, 0
	}
	z := s.enc.EncodeAll(b, make([]byte, 0, len(b)/2))
	if len(z) < len(b) {
		return z, recFlagZstd
	}
	return b, 0
}
