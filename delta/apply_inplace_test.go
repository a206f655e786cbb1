package delta

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestApplyInPlace checks that an in-place apply gives what Apply gives,
// and that it declines, leaving the base untouched, exactly when a copy
// would read bytes it had overwritten or the target does not fit.
func TestApplyInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := make([]byte, 1<<16)
	for i := range base {
		base[i] = byte(r.IntN(7)) // repetitive, so copies come from anywhere
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(base)) }
	cases := map[string]struct {
		target []byte
		slack  int // extra capacity after the base
		want   bool
	}{
		"overwrite":        {edit(func(b []byte) []byte { copy(b[300:], "edited"); return b }), 0, true},
		"truncate":         {base[:1000], 0, true},
		"delete middle":    {edit(func(b []byte) []byte { return append(b[:500:500], b[9000:]...) }), 0, true},
		"append, room":     {append(bytes.Clone(base), "tail"...), 4, true},
		"append, no room":  {append(bytes.Clone(base), "tail"...), 0, false},
		"insert in middle": {edit(func(b []byte) []byte { return append(append(b[:500:500], "new bytes"...), base[500:]...) }), 64, false},
		"identical":        {bytes.Clone(base), 0, true},
	}
	for name, c := range cases {
		d := Encode(base, c.target)
		want, err := Apply(base, d)
		if err != nil || !bytes.Equal(want, c.target) {
			t.Fatalf("%s: Apply: %v", name, err)
		}
		buf := append(make([]byte, 0, len(base)+c.slack), base...)
		got, ok, err := ApplyInPlace(buf, d)
		if err != nil || ok != c.want {
			t.Errorf("%s: in place %v, %v; want %v", name, ok, err, c.want)
			continue
		}
		if ok && !bytes.Equal(got, c.target) {
			t.Errorf("%s: in place gave other bytes", name)
		}
		if !ok && !bytes.Equal(buf, base) {
			t.Errorf("%s: declined but changed the base", name)
		}
	}
	if _, _, err := ApplyInPlace(base[:10], Encode(base, base[:5])); err == nil {
		t.Error("a base of another length was accepted")
	}
}
