package mount

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// The snapshot column of "deltafs log" without garbage. The store names
// the (snapshot, revision) pairs of one file from the file's own hold
// rows (objstore.EachHolder); they are collected into a pooled list,
// sorted by revision, and walked beside the file's revisions, so a row
// takes its snapshot names straight from the snapshot list (the
// snapshotter's cached copy in a mount: no scan of the snapshot records
// and no string copied). A call of 10,000 revisions then allocates a few
// kilobytes, where building each row's lists allocated megabytes of
// short-lived garbage that the Go heap let grow the mount's RSS by 20 MiB
// over 200 calls (BENCHMARKS.md, H1).

// heldPair says that snapshot list[snap] holds revision rev.
type heldPair struct {
	rev  index.Rev
	snap int32
}

func cmpHeld(a, b heldPair) int {
	if c := cmp.Compare(a.rev, b.rev); c != 0 {
		return c
	}
	return cmp.Compare(a.snap, b.snap)
}

// holders is the snapshot column of one file's log.
type holders struct {
	list  []index.Snapshot // read-only
	pairs []heldPair       // sorted; consumed from the front
	buf   *[]heldPair      // pooled backing of pairs
	pool  *sync.Pool
}

// loadHolders reads which snapshots of list hold which revisions of fid,
// into a list from pool (of *[]heldPair).
func loadHolders(ctx context.Context, st *objstore.Store, fid index.FileID, list []index.Snapshot, pool *sync.Pool) (*holders, error) {
	h := &holders{list: list, pool: pool}
	h.buf, _ = pool.Get().(*[]heldPair)
	if h.buf == nil {
		h.buf = new([]heldPair)
	}
	pairs := (*h.buf)[:0]
	err := st.EachHolder(ctx, fid, list, func(i int, rev index.Rev) {
		pairs = append(pairs, heldPair{rev: rev, snap: int32(i)})
	})
	slices.SortFunc(pairs, cmpHeld)
	h.pairs, *h.buf = pairs, pairs
	if err != nil {
		h.release()
		return nil, err
	}
	return h, nil
}

// next returns the pairs of revision rev (revisions come in order).
func (h *holders) next(rev index.Rev) []heldPair {
	i := 0
	for i < len(h.pairs) && h.pairs[i].rev < rev {
		i++ // a revision gc removed: its pairs cannot be (snapshots keep theirs)
	}
	j := i
	for j < len(h.pairs) && h.pairs[j].rev == rev {
		j++
	}
	out := h.pairs[i:j]
	h.pairs = h.pairs[j:]
	return out
}

// names returns the snapshot names of pairs (nil for none).
func (h *holders) names(pairs []heldPair) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, h.list[p.snap].Name)
	}
	return out
}

// release returns the pair list to the pool; h is unusable after.
func (h *holders) release() {
	if cap(*h.buf) <= 1<<20 {
		h.pool.Put(h.buf)
	}
	h.buf, h.pairs = nil, nil
}
