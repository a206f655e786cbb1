package objstore

import (
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/delta"
)

// sampleText is text-like data: words from a vocabulary of 500, so that
// unrelated texts share short runs (words) but rarely long ones.
func sampleText(r *rand.Rand, n int) []byte {
	var b []byte
	for len(b) < n {
		w := r.IntN(500)
		for k := range 2 + w%7 {
			b = append(b, byte('a'+(w*7+k*13)%26))
		}
		b = append(b, " \n"[r.IntN(2)])
	}
	return b[:n]
}

func TestSharesRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := sampleText(r, 8000)
	edited := append(append(append([]byte{}, base[:3000]...), sampleText(r, 200)...), base[3100:]...)
	half := append(append([]byte{}, base[:4000]...), sampleText(r, 4000)...)
	unrelated := sampleText(r, 8000)
	tests := []struct {
		name         string
		base, target []byte
		want         bool
	}{
		{"identical", base, base, true},
		{"small edit", base, edited, true},
		{"half copied", base, half, true},
		{"unrelated text", base, unrelated, false},
		{"tiny target: always computed", base, unrelated[:100], true},
		{"base shorter than a window", base[:8], unrelated, false},
	}
	for _, tc := range tests {
		if got := sharesRuns(tc.base, tc.target); got != tc.want {
			t.Errorf("%s: sharesRuns = %v, want %v", tc.name, got, tc.want)
		}
	}
	// What it stands for: the unrelated text's copy delta inserts nearly
	// all of it, the half-copied one well under 3/4.
	if d := delta.Encode(base, unrelated); len(d) < similarCut(len(unrelated)) {
		t.Errorf("unrelated text: copy delta %d bytes, under the cut %d", len(d), similarCut(len(unrelated)))
	}
	if d := delta.Encode(base, half); len(d) > similarCut(len(half)) {
		t.Errorf("half copied: copy delta %d bytes, over the cut %d", len(d), similarCut(len(half)))
	}
}

// A rolled hash must equal the hash of the window from scratch, or
// sharesRuns would miss every run.
func TestSharesRunsRollingHash(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		target := sampleText(r, runSampleMinText+r.IntN(5000))
		// The base holds the target's whole text at a random offset in
		// other text: every sample is met.
		pre := sampleText(r, r.IntN(3000))
		base := append(append(pre, target...), sampleText(r, 100)...)
		if !sharesRuns(base, target) {
			t.Fatalf("target embedded at %d of a %d-byte base not found", len(pre), len(base))
		}
	}
}
