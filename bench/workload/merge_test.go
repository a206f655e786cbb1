package workload

import (
	"bytes"
	"testing"

	"github.com/deltafs/deltafs/delta"
)

// TestMergeHistory checks the S2 shape: about 30% merges, every one a true
// merge (neither parent an ancestor of the other: no fast-forwards),
// parents before their children, merges closer to p2 than to p1, and the
// same history from two walks.
func TestMergeHistory(t *testing.T) {
	m := StoreS2()
	m.Size, m.Revisions = 64<<10, 300
	var revs []MergeRev
	if err := m.Walk(func(n int, r MergeRev) error {
		if n != len(revs) || r.P1 >= n || r.P2 >= n || (n > 0 && r.P1 < 0) {
			t.Fatalf("rev %d: parents %d, %d", n, r.P1, r.P2)
		}
		revs = append(revs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	anc := ancestors(revs)
	merges, closer, same := 0, 0, 0
	for n, r := range revs {
		if r.P2 < 0 {
			continue
		}
		merges++
		if anc[r.P1][r.P2] || anc[r.P2][r.P1] {
			t.Fatalf("rev %d: merge of %d and %d, one an ancestor of the other (a fast-forward)", n, r.P1, r.P2)
		}
		if bytes.Equal(r.Data, revs[r.P1].Data) || bytes.Equal(r.Data, revs[r.P2].Data) {
			same++ // p1's line only edited blocks that conflicted
		}
		if len(delta.Encode(revs[r.P2].Data, r.Data)) <= len(delta.Encode(revs[r.P1].Data, r.Data)) {
			closer++
		}
	}
	if merges < m.Revisions/4 || merges > m.Revisions*35/100 {
		t.Fatalf("%d merges in %d revisions, want 25-35%%", merges, m.Revisions)
	}
	if same > merges/20 {
		t.Fatalf("%d of %d merges equal a parent", same, merges)
	}
	// Divergence is counted in edited bytes, not in encoded delta bytes,
	// and a conflict goes to p2: a few merges may still be closer to p1.
	if closer < merges*7/10 {
		t.Fatalf("only %d of %d merges closer to p2 than to p1", closer, merges)
	}
	var again [][]byte
	_ = m.Walk(func(_ int, r MergeRev) error { again = append(again, r.Data); return nil })
	for i := range revs {
		if !bytes.Equal(revs[i].Data, again[i]) {
			t.Fatalf("rev %d differs between two walks", i)
		}
	}
}

// ancestors returns, for every revision, the set of its ancestors
// (itself included).
func ancestors(revs []MergeRev) []map[int]bool {
	anc := make([]map[int]bool, len(revs))
	for n, r := range revs {
		anc[n] = map[int]bool{n: true}
		for _, p := range []int{r.P1, r.P2} {
			if p >= 0 {
				for a := range anc[p] {
					anc[n][a] = true
				}
			}
		}
	}
	return anc
}
