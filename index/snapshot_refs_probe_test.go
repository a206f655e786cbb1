package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRawRefsFileRevsAgreesWithRoaring: the byte walk finds exactly the
// revisions of a file that the decoded set holds, for sets of sparse
// arrays, dense bitmaps and runs, with and without offset headers.
func TestRawRefsFileRevsAgreesWithRoaring(t *testing.T) {
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 7))
		set := NewRefs()
		files := []FileID{1, 2, 3, 70000, 1<<32 - 1}
		for range 1 + r.IntN(40) {
			rev := Rev(r.IntN(50))
			switch r.IntN(4) {
			case 0: // sparse
				for range 1 + r.IntN(30) {
					f := FileID(1 + r.IntN(200000))
					files = append(files, f)
					k, _ := RefKey(RevID{File: f, Rev: rev})
					set.Add(k)
				}
			case 1: // dense: a bitmap container
				lo := uint64(r.IntN(3)) << 16
				for range 5000 {
					set.Add(uint64(rev)<<32 | lo | uint64(r.IntN(1<<16)))
				}
			default: // a range: a run after RunOptimize
				lo := uint64(1 + r.IntN(100000))
				set.AddRange(uint64(rev)<<32|lo, uint64(rev)<<32|(lo+uint64(1+r.IntN(3000))))
				files = append(files, FileID(lo), FileID(lo-1))
			}
		}
		b, err := encodeRefs(set) // run-optimises
		if err != nil {
			t.Fatal(err)
		}
		raw, err := rawRefs(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			got, err := raw.FileRevs(nil, f)
			if err != nil {
				t.Fatalf("seed %d file %d: %v", seed, f, err)
			}
			var want []Rev
			for rev := range Rev(50) {
				if k, _ := RefKey(RevID{File: f, Rev: rev}); set.Contains(k) {
					want = append(want, rev)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d file %d: %v, want %v", seed, f, got, want)
			}
		}
	}
}

func TestRawRefsRejectsDamage(t *testing.T) {
	set := NewRefs()
	for f := range FileID(300) {
		k, _ := RefKey(RevID{File: f + 1, Rev: Rev(f % 7)})
		set.Add(k)
	}
	b, _ := encodeRefs(set)
	if _, err := rawRefs(append([]byte{}, b[:len(b)-1]...)); !errors.Is(err, ErrDecode) {
		t.Fatalf("truncated set: %v", err)
	}
	raw, _ := rawRefs(b)
	for cut := range len(raw) {
		if _, err := RawRefs(raw[:cut]).FileRevs(nil, 5); !errors.Is(err, ErrDecode) {
			t.Fatalf("set cut at %d of %d: %v", cut, len(raw), err)
		}
	}
}

func FuzzRawRefs(f *testing.F) {
	set := NewRefs()
	set.AddRange(1, 100)
	k, _ := RefKey(RevID{File: 9, Rev: 3})
	set.Add(k)
	b, _ := encodeRefs(set)
	f.Add(b[8:], uint32(9))
	f.Add(b[8:], uint32(5))
	f.Fuzz(func(t *testing.T, b []byte, file uint32) {
		f := FileID(file%16 + 1)
		revs, err := RawRefs(b).FileRevs(nil, f) // must not panic
		if err != nil && !errors.Is(err, ErrDecode) {
			t.Fatalf("error not ErrDecode: %v", err)
		}
		// On a set the decoder accepts and roaring validates, the probe
		// answers the same. (decodeRefs does not validate, see there: a
		// run past 65535, which roaring wraps round and the probe does
		// not, passes it; only a writer's bug could store one, behind its
		// checksum.)
		set, derr := decodeRefs(append(encodeSum(b), b...))
		if derr != nil {
			if !errors.Is(derr, ErrDecode) {
				t.Fatalf("decode error not ErrDecode: %v", derr)
			}
			return
		}
		if set.Validate() != nil || set.GetCardinality() > 1<<16 {
			return
		}
		if err != nil {
			t.Fatalf("probe refuses a set the decoder takes: %v", err)
		}
		var want []Rev
		for it := set.Iterator(); it.HasNext(); {
			if id := RefID(it.Next()); id.File == f {
				want = append(want, id.Rev)
			}
		}
		if fmt.Sprint(revs) != fmt.Sprint(want) {
			t.Fatalf("probe gives %v for file %d, the decoded set %v", revs, f, want)
		}
	})
}
