package objstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// A two-base record (index.KindP1P2: a merge's delta against the
// concatenation of two bases' texts, Base's then Base2's) makes a
// revision's records a graph, not a chain: the two bases' chains share
// their older part (the merged lines' common history). Such a revision is
// rebuilt by a graph read: every record of the graph read once (in
// segment order, as a chain read does), applied once, bases before their
// users, and each text dropped as soon as its last user in the graph is
// applied. Its chain facts (index.Entry.ChainLen and ChainBytes) count
// each distinct record of the graph once, which is what this read costs;
// what it holds at once is bounded when the record is chosen (see
// Candidate.Held and Caps.MaxHeldRatio), with the read order computed by
// the same code (walkGraph, recGraph.peakHeld).
//
// A revision whose graph is a plain chain never comes here: chain()
// sends a read here only when it meets a two-base record, so ordinary
// reads keep their two-buffer path.

// errGraph: the chain walk met a two-base record; read the graph instead.
var errGraph = errors.New("record graph")

// gnode is one record of a revision's graph.
type gnode struct {
	e      index.Entry // just the RevID and Size for a start text
	b1, b2 int32       // the bases' positions in the graph, -1 for none
	start  []byte      // a cached text the read starts from, not read
	users  int32       // records of the graph whose base this one is
}

// recGraph is a revision's record graph, bases before their users (a
// depth-first post-order from the revision, Base before Base2); the last
// node is the revision.
type recGraph struct {
	nodes  []gnode
	deltas int    // delta records (not start texts or fulltexts)
	bytes  uint64 // stored bytes of the records read
}

// entryFunc looks a revision's entry up: Store.entry, or a caller's
// copy of part of the index (repack's plan).
type entryFunc func(index.RevID) (index.Entry, error)

// walkGraph collects the record graph of e. A base found in cache is a
// start text, not followed. limit is the most delta records the graph may
// hold (e's ChainLen, which counts them; a corrupt index could say
// anything else).
func (s *Store) walkGraph(want index.RevID, e index.Entry, cache caches, limit int) (*recGraph, error) {
	return walkGraph(s.entry, want, e, cache, limit)
}

// walkGraph is Store.walkGraph with the entries from entry.
func walkGraph(entry entryFunc, want index.RevID, e index.Entry, cache caches, limit int) (*recGraph, error) {
	type frame struct {
		n    gnode
		next int // 0: visit Base, 1: visit Base2, 2: done
	}
	g := &recGraph{}
	pos := map[index.RevID]int32{}
	onStack := map[index.RevID]bool{e.ID(): true}
	stack := []frame{{n: gnode{e: e, b1: -1, b2: -1}}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		var child index.RevID
		switch {
		case f.n.start != nil || f.n.e.Kind == index.KindFull || f.next == 2:
			if err := g.emit(want, f.n, pos, limit); err != nil {
				return nil, err
			}
			delete(onStack, f.n.e.ID())
			stack = stack[:len(stack)-1]
			continue
		case f.next == 0:
			child, f.next = f.n.e.Base, 1
		default:
			child, f.next = f.n.e.Base2, 2
		}
		if _, done := pos[child]; done || child.IsNull() {
			continue
		}
		if onStack[child] || len(stack) > maxChainWalk {
			return nil, corrupt(want, &f.n.e, fmt.Errorf("base %v: record graph has a cycle", child))
		}
		n, err := graphNode(entry, want, &f.n.e, child, cache)
		if err != nil {
			return nil, err
		}
		onStack[child] = true
		stack = append(stack, frame{n: n})
	}
	return g, nil
}

// graphNode returns the node of base id of e: a start text if cached.
func graphNode(entry entryFunc, want index.RevID, e *index.Entry, id index.RevID, cache caches) (gnode, error) {
	n := gnode{b1: -1, b2: -1}
	if t, ok := cache.get(id); ok {
		n.e, n.start = index.Entry{File: id.File, Rev: id.Rev, Size: uint64(len(t))}, t
		return n, nil
	}
	be, err := entry(id)
	if err != nil {
		return n, corrupt(want, e, fmt.Errorf("base %v: %w", id, err))
	}
	if be.Kind == index.KindDedup {
		return n, corrupt(want, e, fmt.Errorf("base %v has no data of its own", id))
	}
	n.e = be
	return n, nil
}

// emit appends n, its bases already in the graph.
func (g *recGraph) emit(want index.RevID, n gnode, pos map[index.RevID]int32, limit int) error {
	if n.start == nil && n.e.Kind != index.KindFull {
		n.b1 = pos[n.e.Base]
		g.nodes[n.b1].users++
		if !n.e.Base2.IsNull() {
			n.b2 = pos[n.e.Base2]
			g.nodes[n.b2].users++
		}
		g.deltas++
	}
	if n.start == nil {
		g.bytes += uint64(n.e.Stored)
	}
	if g.deltas > limit || len(g.nodes) >= maxChainWalk {
		return corrupt(want, &n.e, fmt.Errorf("record graph of more than %d deltas: longer than recorded", limit))
	}
	pos[n.e.ID()] = int32(len(g.nodes))
	g.nodes = append(g.nodes, n)
	return nil
}

// peakHeld returns the most text bytes the graph read holds at once: the
// texts still to be used and the one being built; a two-base record is
// applied to a concatenation of its bases' texts, made before they are
// dropped (if it is their last user). readGraph holds exactly these.
func (g *recGraph) peakHeld() uint64 {
	users := make([]int32, len(g.nodes))
	for i := range g.nodes {
		users[i] = g.nodes[i].users
	}
	var held, peak uint64
	release := func(n *gnode) {
		for _, b := range [2]int32{n.b1, n.b2} {
			if b >= 0 {
				if users[b]--; users[b] == 0 {
					held -= g.nodes[b].e.Size
				}
			}
		}
	}
	for i := range g.nodes {
		n := &g.nodes[i]
		var cat uint64
		if n.b2 >= 0 {
			cat = g.nodes[n.b1].e.Size + g.nodes[n.b2].e.Size
			held += cat
			peak = max(peak, held)
			release(n)
		}
		peak = max(peak, held+n.e.Size)
		held += n.e.Size - cat
		if n.b2 < 0 {
			release(n)
		}
	}
	return peak
}

// readGraph rebuilds e through its record graph (see above) and checks
// the result against e's hash; like rebuildOwned, it reports whether the
// text is the caller's (built here and kept by no cache).
func (s *Store) readGraph(ctx context.Context, want index.RevID, e index.Entry, cache caches) ([]byte, bool, error) {
	g, err := s.walkGraph(want, e, cache, int(e.ChainLen))
	if err != nil {
		return nil, false, err
	}
	var recs []index.Entry
	at := make([]int, len(g.nodes)) // node -> its payload in recs
	for i := range g.nodes {
		if g.nodes[i].start == nil {
			at[i] = len(recs)
			recs = append(recs, g.nodes[i].e)
		}
	}
	payloads, err := s.readChain(ctx, want, recs)
	if err != nil {
		return nil, false, err
	}
	texts := make([][]byte, len(g.nodes))
	owned := make([]bool, len(g.nodes))
	last := len(g.nodes) - 1
	for i := range g.nodes {
		n := &g.nodes[i]
		switch {
		case n.start != nil:
			texts[i] = n.start
		case n.e.Kind == index.KindFull:
			texts[i], owned[i] = payloads[at[i]], true
			if i != last {
				cached, err := s.cacheRoot(want, &n.e, texts[i], cache)
				if err != nil {
					return nil, false, err
				}
				owned[i] = !cached
			}
		default:
			if texts[i], err = s.applyGraphNode(want, texts, owned, g, n, payloads[at[i]]); err != nil {
				return nil, false, err
			}
			owned[i] = true
			continue // its bases are released
		}
		s.releaseBases(g, texts, owned, n)
	}
	text := texts[last]
	if err := s.checkHash(want, &e, text); err != nil {
		return nil, false, err
	}
	return text, !cache.full.add(e.ID(), text), nil
}

// applyGraphNode applies n's delta to its base's text, or to the
// concatenation of its two bases' texts, and releases the bases it was
// the last user of (a two-base record's before its apply, once they are
// copied: see peakHeld).
func (s *Store) applyGraphNode(want index.RevID, texts [][]byte, owned []bool, g *recGraph, n *gnode, d []byte) ([]byte, error) {
	src := texts[n.b1]
	var cat []byte
	if n.b2 >= 0 {
		cat = s.getBuf(uint64(len(src) + len(texts[n.b2])))
		cat = append(append(cat, src...), texts[n.b2]...)
		src = cat
		s.releaseBases(g, texts, owned, n)
	}
	out, err := delta.AppendApply(s.getBuf(n.e.Size), src, d)
	if cat != nil {
		s.putBuf(cat)
	} else {
		s.releaseBases(g, texts, owned, n)
	}
	if err != nil {
		return nil, corrupt(want, &n.e, err)
	}
	if uint64(len(out)) != n.e.Size {
		return nil, corrupt(want, &n.e, fmt.Errorf("delta gave %d bytes, index says %d", len(out), n.e.Size))
	}
	return out, nil
}

// releaseBases drops n's bases' texts once n was their last user.
func (s *Store) releaseBases(g *recGraph, texts [][]byte, owned []bool, n *gnode) {
	for _, b := range [2]int32{n.b1, n.b2} {
		if b < 0 {
			continue
		}
		if g.nodes[b].users--; g.nodes[b].users == 0 {
			if owned[b] {
				s.putBuf(texts[b])
			}
			texts[b] = nil
		}
	}
}

// twoBaseFacts returns the chain facts of a two-base record on b1 and b2
// (not counting the record itself) and the most text bytes its graph read
// holds at once, a record of size bytes included: the union of the two
// bases' graphs, each record once, read with no cache.
func (s *Store) twoBaseFacts(b1, b2 index.Entry, size uint64) (Candidate, error) {
	return twoBaseFacts(s.entry, b1, b2, size)
}

// twoBaseFacts is Store.twoBaseFacts with the entries from entry.
func twoBaseFacts(entry entryFunc, b1, b2 index.Entry, size uint64) (Candidate, error) {
	self := index.Entry{File: b1.File, Rev: ^index.Rev(0), Kind: index.KindP1P2, Base: b1.ID(), Base2: b2.ID(),
		Size: size, Flags: index.FlagDelta}
	g, err := walkGraph(entry, self.ID(), self, caches{}, maxChainWalk)
	if err != nil {
		return Candidate{}, err
	}
	return Candidate{Role: RoleP1P2, Base: b1.ID(), Base2: b2.ID(), BaseChainLen: uint32(min(g.deltas-1, 1<<31)),
		BaseChainBytes: g.bytes, Held: g.peakHeld(), DeltaLen: -1}, nil
}
