package delta

import (
	"bytes"
	"errors"
	"testing"
)

func TestValidate(t *testing.T) {
	base := bytes.Repeat([]byte("0123456789abcdef"), 256)
	target := append(bytes.Clone(base[:1000]), []byte("inserted text")...)
	target = append(target, base[2000:]...)
	d := Encode(base, target)
	if err := Validate(d, uint64(len(base))); err != nil {
		t.Fatalf("valid delta: %v", err)
	}
	if err := Validate(d, uint64(len(base))+1); !errors.Is(err, ErrBaseMismatch) {
		t.Fatalf("wrong base length: %v, want ErrBaseMismatch", err)
	}
	for _, bad := range [][]byte{nil, d[:len(d)-1], append(bytes.Clone(d), 0x04)} {
		if err := Validate(bad, uint64(len(base))); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Validate(%x...) = %v, want ErrCorrupt", bad[:min(len(bad), 8)], err)
		}
	}
}

// FuzzValidate: Validate and Apply agree on every input.
func FuzzValidate(f *testing.F) {
	base := []byte("the quick brown fox jumps over the lazy dog")
	f.Add(Encode(base, []byte("the quick red fox jumps over the dog")))
	f.Add([]byte{1, 3, 3, 13, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, d []byte) {
		_, aerr := Apply(base, d)
		verr := Validate(d, uint64(len(base)))
		if c, _, _, _ := Header(d); c == CodecZstd {
			return // its frame is checked only by Apply
		}
		if (aerr == nil) != (verr == nil) {
			t.Fatalf("Apply: %v, Validate: %v", aerr, verr)
		}
	})
}
