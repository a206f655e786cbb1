package workload

import (
	"bytes"
	"testing"

	"github.com/deltafs/deltafs/delta"
)

// TestMergeHistory checks the S2 shape: about 30% merges, parents before
// their children, deterministic, and merges closer to p2 than to p1.
func TestMergeHistory(t *testing.T) {
	m := StoreS2()
	m.Size, m.Revisions = 32<<10, 300
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
	merges, closer := 0, 0
	for _, r := range revs {
		if r.P2 < 0 {
			continue
		}
		merges++
		if len(delta.Encode(revs[r.P2].Data, r.Data)) <= len(delta.Encode(revs[r.P1].Data, r.Data)) {
			closer++
		}
	}
	// MergeFrac 0.3 gives about 25%: no merge is drawn while neither
	// line has anything to merge.
	if merges < m.Revisions/5 || merges > m.Revisions*35/100 {
		t.Fatalf("%d merges in %d revisions, want 20-35%%", merges, m.Revisions)
	}
	// Pending edits are counted, not sized: a merge after equal counts
	// may be a little closer to p1.
	if closer < merges*8/10 {
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
