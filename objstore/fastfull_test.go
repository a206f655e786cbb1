package objstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestFastFulltextsRecompressedByRepack: a store opened with
// FastFulltexts marks its fulltexts, which are no smaller than the better
// level's; a repack, --reuse=auto included, recompresses exactly those,
// to the bytes a default store stores, and clears the mark.
func TestFastFulltextsRecompressedByRepack(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 7))
	texts := make([][]byte, 20)
	for i := range texts {
		texts[i] = genText(r, 2<<10+r.IntN(60<<10))
	}
	fill := func(cfg Config) (string, uint64) {
		s, dir := openNew(t, cfg)
		for i, text := range texts {
			f, err := s.NewFile(fmt.Sprint("f", i))
			if err != nil {
				t.Fatal(err)
			}
			e, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(text)})
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind != index.KindFull || (e.Flags&index.FlagFastZstd != 0) != cfg.FastFulltexts {
				t.Fatalf("%v: kind %v flags %v with FastFulltexts %v", e.ID(), e.Kind, e.Flags, cfg.FastFulltexts)
			}
		}
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return dir, st.StoredBytes
	}
	_, better := fill(Config{})
	fastDir, fast := fill(Config{FastFulltexts: true})
	if fast <= better {
		t.Fatalf("fast fulltexts %d bytes, better level %d: want the fast level larger", fast, better)
	}
	if _, err := Repack(ctx, fastDir, RepackOptions{Reuse: ReuseAuto}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(fastDir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.StoredBytes != better {
		t.Errorf("after repack %d bytes, a default store %d", st.StoredBytes, better)
	}
	err = s.idx.All(ctx, func(e index.Entry) error {
		if e.Flags&index.FlagFastZstd != 0 {
			t.Errorf("%v still marked fast after repack", e.ID())
		}
		got, err := s.Get(ctx, e.ID())
		if err != nil {
			return err
		}
		if !bytes.Equal(got, texts[int(e.File)-1]) {
			t.Errorf("%v reads back different bytes", e.ID())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
