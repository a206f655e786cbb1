package objstore

import (
	"context"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// twoBaseMaxText bounds the two parents' texts together for a two-base
// candidate. Unlike a delta against one parent (delta.Encode's trimming
// and local resynchronisation follow the change), it indexes the whole
// concatenation of both texts (delta.NewIndex: S2's merges bring edits
// from p1 anywhere in the file, which delta.Encode, searching near where
// p2 lines up, does not find), so its cost follows the file, as the
// zstd-dictionary codec's does; it gets the same bound (zstdTryMaxBase).
// What a graph read of such a revision holds at once is capped
// (Caps.MaxHeldRatio, graph.go).
const twoBaseMaxText = zstdTryMaxBase

// twoBase returns the two-base candidate of a merge (see graph.go): a
// delta against the concatenation of both parents' texts, the parent
// with the smaller delta first, with chain facts counting the distinct
// records of both graphs. ok is false when there is none to try: not both
// parents' deltas computed (a parent's chain alone over the caps rules
// out the union), the same content twice, texts over twoBaseMaxText, or
// a union graph over the caps.
func (s *Store) twoBase(ctx context.Context, cands []prepared, data []byte, t Target) (prepared, bool, error) {
	if s.cfg.P1Only {
		return prepared{}, false, nil
	}
	return twoBaseCandidate(ctx, s, s, cands, data, t, s.caps)
}

// twoBaseCandidate is twoBase with the bases' entries and graphs taken
// from graph and their texts (and the encoders) from texts: a repack
// chooses bases in its shadow and reads texts from the live store.
func twoBaseCandidate(ctx context.Context, graph, texts *Store, cands []prepared, data []byte, t Target, caps Caps) (prepared, bool, error) {
	var p1, p2 *prepared
	for i := range cands {
		switch cands[i].Role {
		case RoleP1:
			p1 = &cands[i]
		case RoleP2:
			p2 = &cands[i]
		}
	}
	if p1 == nil || p2 == nil || p1.DeltaLen < 0 || p2.DeltaLen < 0 {
		return prepared{}, false, nil
	}
	if p2.DeltaLen < p1.DeltaLen {
		p1, p2 = p2, p1 // the closer parent first
	}
	b1, err := graph.entry(p1.Base)
	if err != nil {
		return prepared{}, false, err
	}
	b2, err := graph.entry(p2.Base)
	if err != nil {
		return prepared{}, false, err
	}
	same := b1.Size == b2.Size && b1.Hash == b2.Hash && b1.Flags&b2.Flags&index.FlagHashDeferred == 0
	if same || b1.Size+b2.Size > twoBaseMaxText {
		return prepared{}, false, nil
	}
	c, err := graph.twoBaseFacts(b1, b2, t.TextLen)
	if err != nil || ChainRule(c, t, caps) != "" {
		return prepared{}, false, err
	}
	x, err := texts.fulltext(ctx, b1.ID())
	if err != nil {
		return prepared{}, false, err
	}
	y, err := texts.fulltext(ctx, b2.ID())
	if err != nil {
		return prepared{}, false, err
	}
	cat := append(append(texts.getBuf(uint64(len(x)+len(y))), x...), y...)
	payload, flags := texts.compress(delta.NewIndex(cat).Encode(data))
	if len(payload) > zstdTryMin {
		if z, err := delta.EncodeZstd(cat, data, deltaZstdLevel); err == nil && len(z) < len(payload) {
			payload, flags = z, 0
		}
	}
	texts.putBuf(cat)
	c.DeltaLen = int64(recOverhead + len(payload))
	return prepared{Candidate: c, payload: payload, flags: flags | recFlagDelta}, true, nil
}
