package objstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestRepackAfterPruningGC: gc --prune-unsnapshotted leaves a file's
// history starting past revision 0; a repack after it, both reuse modes,
// must take the gap in its stride and keep the newest text readable.
func TestRepackAfterPruningGC(t *testing.T) {
	ctx := context.Background()
	for _, reuse := range []Reuse{ReuseAuto, ReuseNever} {
		s, dir := openNew(t, Config{})
		f, err := s.NewFile("a")
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.NewFile("b")
		if err != nil {
			t.Fatal(err)
		}
		prev, last := index.NullRev, []byte(nil)
		for i := range 10 {
			last = []byte(fmt.Sprintf("text %d of file a, and a few more bytes of it\n", i))
			e, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(last), P1: prev})
			if err != nil {
				t.Fatal(err)
			}
			prev = e.ID()
		}
		if _, err := s.Put(ctx, PutRequest{File: g, Data: []byte("bee")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		live := func() (map[index.FileID]bool, error) { return map[index.FileID]bool{f: true, g: true}, nil }
		rep, err := GC(ctx, dir, GCOptions{Live: live, Policy: GCPolicy{PruneUnsnapshotted: true}})
		if err != nil || rep.Removed != 9 {
			t.Fatalf("gc: removed %d, %v; want 9", rep.Removed, err)
		}
		if _, err := Repack(ctx, dir, RepackOptions{Reuse: reuse}); err != nil {
			t.Fatalf("repack %v after gc: %v", reuse, err)
		}
		s, err = Open(dir, Config{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, prev); err != nil || !bytes.Equal(got, last) {
			t.Errorf("reuse %v: newest revision %q, %v", reuse, got, err)
		}
		if _, err := s.Verify(ctx, func(p Problem) { t.Errorf("reuse %v: verify: %v", reuse, p) }); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}
