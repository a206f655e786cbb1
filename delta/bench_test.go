package delta

import (
	"math/rand/v2"
	"testing"
)

// editedPair returns a text-like base of n bytes and a target with k small
// random edits.
func editedPair(n, k int) (base, target []byte) {
	base = textLike(100, n)
	r := rand.New(rand.NewPCG(5, 6))
	target = base
	for range k {
		target = edit(target, r, r.IntN(len(target)))
	}
	return base, target
}

func BenchmarkEncode(b *testing.B) {
	for _, k := range []int{1, 5, 100} {
		base, target := editedPair(16<<20, k)
		b.Run(map[int]string{1: "16MiB-1edit", 5: "16MiB-5edits", 100: "16MiB-100edits"}[k], func(b *testing.B) {
			b.SetBytes(int64(len(target)))
			b.ReportAllocs()
			var d []byte
			for b.Loop() {
				d = Encode(base, target)
			}
			b.ReportMetric(float64(len(d)), "delta-bytes")
		})
	}
}

func BenchmarkIndexEncode(b *testing.B) {
	base, target := editedPair(16<<20, 5)
	ix := NewIndex(base)
	b.SetBytes(int64(len(target)))
	b.ReportAllocs()
	for b.Loop() {
		ix.Encode(target)
	}
}

func BenchmarkNewIndex(b *testing.B) {
	base := textLike(100, 16<<20)
	b.SetBytes(int64(len(base)))
	b.ReportAllocs()
	for b.Loop() {
		NewIndex(base)
	}
}

func BenchmarkApply(b *testing.B) {
	base, target := editedPair(16<<20, 5)
	d := Encode(base, target)
	dst := make([]byte, 0, len(target))
	b.SetBytes(int64(len(target)))
	b.ReportAllocs()
	for b.Loop() {
		out, err := AppendApply(dst[:0], base, d)
		if err != nil || len(out) != len(target) {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeUnrelated(b *testing.B) {
	base, target := textLike(1, 1<<20), textLike(2, 1<<20)
	b.SetBytes(int64(len(target)))
	for b.Loop() {
		Encode(base, target)
	}
}

func BenchmarkEncodeZstd(b *testing.B) {
	base, target := editedPair(16<<20, 5)
	b.SetBytes(int64(len(target)))
	var d []byte
	for b.Loop() {
		d = must(EncodeZstd(base, target, 2))
	}
	b.ReportMetric(float64(len(d)), "delta-bytes")
}
