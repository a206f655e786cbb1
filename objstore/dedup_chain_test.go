package objstore

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// A file that goes through the same revisions as another (a copy edited
// alike, the same edits made again) dedups each one against the other's:
// the candidate is rebuilt to compare its bytes, and that rebuild starts
// from the candidate's previous revision, matched by the put before, not
// from its chain's root (each put read the whole chain: M6's second run
// spent 29 of its 34 s of CPU so).
func TestDedupOfASecondHistoryReadsOneRecordEach(t *testing.T) {
	// a latest budget of one text, as the mount's is for its 8 MiB files
	s, _ := openNew(t, Config{LatestBytes: 300 << 10})
	r := rand.New(rand.NewPCG(3, 4))
	text := genText(r, 256<<10)
	var texts [][]byte
	for range 40 {
		off := r.IntN(len(text) - 100)
		next := append([]byte(nil), text...)
		copy(next[off:], line(r))
		texts = append(texts, next)
		text = next
	}
	put := func(name string) {
		f := mustNewFile(t, s, name)
		prev := index.NullRev
		for _, tx := range texts {
			prev = mustPut(t, s, PutRequest{File: f, Data: append([]byte(nil), tx...), P1: prev}).ID()
		}
	}
	put("a")
	s.cache.clear()
	before := s.readRecords.Load()
	put("b")
	if n := s.readRecords.Load() - before; n > 2*int64(len(texts)) {
		t.Fatalf("the second history's %d puts read %d records: whole chains, not one delta each", len(texts), n)
	}
	for i := range texts {
		got, err := s.Get(context.Background(), index.RevID{File: 2, Rev: index.Rev(i)})
		if err != nil || string(got) != string(texts[i]) {
			t.Fatalf("revision %d of b: %v", i, err)
		}
	}
}
