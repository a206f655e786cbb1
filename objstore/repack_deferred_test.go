package objstore

import (
	"bytes"
	"context"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestRepackDeferredHashes repacks a store whose revisions were put from
// deltas alone (no content hash): with either reuse mode every revision
// reads back identical and the store verifies clean.
func TestRepackDeferredHashes(t *testing.T) {
	for _, reuse := range []Reuse{ReuseNever, ReuseAuto} {
		df := newDeltaFile(t, Config{}, 3, 1<<20)
		df.putDeltas(t, 8, 2048)
		s, dir, texts := df.s, df.dir, df.texts
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
