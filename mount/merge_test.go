package mount

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/deltafs/deltafs/fs"
)

// TestUnionRangesMatchesBytes checks the one-pass union against the
// bytes it covers, on random lists, sorted (as fs.Change promises) and
// not: sorted, coalesced (no two ranges touch), clipped to size, and
// covering exactly the bytes of either list below size.
func TestUnionRangesMatchesBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 2000 {
		const space = 200
		size := r.Int64N(space + 1)
		a, b := randomRanges(r, space), randomRanges(r, space)
		if iter%2 == 0 { // as the Recorder merges: both sorted and coalesced
			a, b = unionRanges(nil, a, space), unionRanges(nil, b, space)
		}
		got := unionRanges(a, b, size)
		var want, have [space]bool
		for _, rg := range append(append([]fs.Range(nil), a...), b...) {
			for i := rg.Off; i < min(rg.End(), size); i++ {
				want[i] = true
			}
		}
		for i, rg := range got {
			if rg.Len <= 0 || rg.End() > size || i > 0 && rg.Off <= got[i-1].End() {
				t.Fatalf("union(%v, %v, %d) = %v: not sorted, coalesced and clipped", a, b, size, got)
			}
			for j := rg.Off; j < rg.End(); j++ {
				have[j] = true
			}
		}
		if have != want {
			t.Fatalf("union(%v, %v, %d) = %v: covers other bytes", a, b, size, got)
		}
	}
}

func randomRanges(r *rand.Rand, space int64) []fs.Range {
	rs := make([]fs.Range, r.IntN(6))
	for i := range rs {
		off := r.Int64N(space)
		rs[i] = fs.Range{Off: off, Len: 1 + r.Int64N(min(20, space-off))}
	}
	return rs
}

// TestUnionRangesEmpty: nothing left after clipping is no ranges (nil),
// as before.
func TestUnionRangesEmpty(t *testing.T) {
	if got := unionRanges([]fs.Range{rg(10, 5)}, []fs.Range{rg(20, 1)}, 10); got != nil {
		t.Fatalf("union clipped to nothing = %#v, want nil", got)
	}
	if got := unionRanges(nil, nil, 10); got != nil {
		t.Fatalf("union of nothing = %#v, want nil", got)
	}
	if got, want := unionRanges([]fs.Range{rg(0, 5)}, []fs.Range{rg(5, 5)}, 100), []fs.Range{rg(0, 10)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("adjacent ranges = %v, want %v", got, want)
	}
}
