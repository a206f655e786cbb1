package objstore

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestRepackDeferredHashes repacks a store whose revisions were put from
// deltas alone (no content hash): with either reuse mode every revision
// reads back identical and the store verifies clean.
func TestRepackDeferredHashes(t *testing.T) {
	for _, reuse := range []Reuse{ReuseNever, ReuseAuto} {
		s, dir := openNew(t, Config{})
		r := rand.New(rand.NewPCG(3, 4))
		f := mustNewFile(t, s, "big")
		text := genText(r, 1<<20)
		prev := mustPut(t, s, PutRequest{File: f, Data: text}).ID()
		texts := map[index.RevID][]byte{prev: text}
		for range 8 {
			next, d := inPlace(t, r, text, 2048)
			e := mustPut(t, s, deltaOnly(f, prev, d, len(next)))
			texts[e.ID()], text, prev = next, next, e.ID()
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		mustRepack(t, dir, RepackOptions{Reuse: reuse})
		s2, err := Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range texts {
			got, err := s2.Get(context.Background(), id)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("reuse %v: %v after repack: %v", reuse, id, err)
			}
		}
		if reuse == ReuseNever {
			for id := range texts {
				if e, err := s2.Entry(id); err != nil || e.Flags&index.FlagHashDeferred != 0 || e.Hash == 0 {
					t.Errorf("%v after a full repack: flags %v hash %x (%v): want its content hash filled in", id, e.Flags, e.Hash, err)
				}
			}
		}
		verifyClean(t, s2)
		s2.Close()
	}
}
