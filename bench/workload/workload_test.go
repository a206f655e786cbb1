package workload

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestTextDeterministic(t *testing.T) {
	a := NewText(7).Fill(1 << 20)
	b := NewText(7).Fill(1 << 20)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed gave different text")
	}
	if len(a) != 1<<20 {
		t.Fatalf("Fill(1 MiB) gave %d bytes", len(a))
	}
	if bytes.Equal(a, NewText(8).Fill(1<<20)) {
		t.Fatal("different seeds gave the same text")
	}
	// A pinned prefix: if this changes, every published figure changes.
	if got, want := string(a[:24]), string(NewText(7).Fill(24)); got != want {
		t.Fatalf("prefix %q, a shorter Fill gave %q", got, want)
	}
}

func TestTextCompressesLikeText(t *testing.T) {
	data := NewText(1).Fill(4 << 20)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	ratio := float64(len(data)) / float64(len(enc.EncodeAll(data, nil)))
	if ratio < 3 || ratio > 5 {
		t.Fatalf("zstd ratio %.2f, want text-like 3-5x", ratio)
	}
	if bytes.Count(data, []byte("\n")) < len(data)/200 {
		t.Fatal("text has too few lines")
	}
}

func TestEditsSizes(t *testing.T) {
	tx := NewText(3)
	base := tx.Fill(1 << 20)
	orig := bytes.Clone(base)
	spec := EditSpec{Count: 200, MinLen: 10, MaxLen: 500}
	edits := tx.Edits(len(base), spec)
	if len(edits) != spec.Count {
		t.Fatalf("%d edits, want %d", len(edits), spec.Count)
	}
	want := len(base)
	kinds := map[EditKind]int{}
	for _, e := range edits {
		kinds[e.Kind()]++
		n := max(e.Del, len(e.Ins))
		if n < spec.MinLen || n > spec.MaxLen {
			t.Fatalf("edit %+v touches %d bytes, want %d..%d", e, n, spec.MinLen, spec.MaxLen)
		}
		if e.Kind() == Replace && e.Del != len(e.Ins) {
			t.Fatalf("replace deletes %d and inserts %d", e.Del, len(e.Ins))
		}
		want += e.Delta()
	}
	if len(kinds) != 3 {
		t.Fatalf("edit kinds %v, want all three", kinds)
	}
	got := ApplyEdits(base, edits)
	if len(got) != want {
		t.Fatalf("edited length %d, want %d", len(got), want)
	}
	if !bytes.Equal(base, orig) {
		t.Fatal("ApplyEdits modified its input")
	}
}

func TestEditsClustered(t *testing.T) {
	tx := NewText(4)
	base := tx.Fill(4 << 20)
	const region = 64 << 10
	edits := tx.Edits(len(base), EditSpec{Count: 5, MinLen: 10, MaxLen: 500, Region: region})
	// Offsets are relative to the data after the previous edits, so the
	// region in base coordinates is known to within the length changes.
	lo, hi, shift := edits[0].Off, edits[0].Off, 0
	for _, e := range edits {
		lo, hi = min(lo, e.Off), max(hi, e.Off+e.Del)
		shift += abs(e.Delta())
	}
	lo, hi = max(lo-shift, 0), hi+shift
	if hi-lo > region+4*shift {
		t.Fatalf("edits span %d bytes, want about %d", hi-lo, region)
	}
	got := ApplyEdits(base, edits)
	// Outside the region the text is untouched.
	if !bytes.Equal(got[:lo], base[:lo]) {
		t.Fatal("bytes before the region changed")
	}
	tail := len(base) - hi
	if !bytes.Equal(got[len(got)-tail:], base[hi:]) {
		t.Fatal("bytes after the region changed")
	}
}

func TestChainWalk(t *testing.T) {
	c := Chain{Name: "T", Seed: 9, BaseSize: 256 << 10, Steps: 5,
		Edits: EditSpec{Count: 5, MinLen: 10, MaxLen: 500}, CountMin: 1}
	walk := func() [][]byte {
		var revs [][]byte
		if err := c.Walk(func(_ int, rev []byte) error {
			revs = append(revs, rev)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return revs
	}
	a, b := walk(), walk()
	if len(a) != c.Steps+1 {
		t.Fatalf("%d revisions, want %d", len(a), c.Steps+1)
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("revision %d differs between walks", i)
		}
		if i > 0 && bytes.Equal(a[i], a[i-1]) {
			t.Fatalf("revision %d equals its predecessor", i)
		}
		if i > 0 && abs(len(a[i])-len(a[i-1])) > 5*500 {
			t.Fatalf("revision %d changed length by %d", i, len(a[i])-len(a[i-1]))
		}
	}
}

func TestDeltaChains(t *testing.T) {
	names := ""
	for _, c := range DeltaChains() {
		names += c.Name
		if got, ok := ChainByName(c.Name); !ok || got.Seed != c.Seed {
			t.Fatalf("ChainByName(%s) = %v, %v", c.Name, got, ok)
		}
	}
	if names != "D1D2D3D4" {
		t.Fatalf("chains %s, want D1-D4", names)
	}
}

func abs(x int) int { return max(x, -x) }
