package delta

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// memFile is a growable file in memory, for ApplyInPlaceAt.
type memFile struct{ b []byte }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	return copy(m.b[off:], p), nil
}

// TestApplyInPlaceAt checks that a delta applied over a base in a file
// gives what Apply gives, that it declines exactly where ApplyInPlace
// does (writing nothing), and that the moves, runs and holes of real
// deltas come out right in a real file, with copies longer than its
// block.
func TestApplyInPlaceAt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	base := make([]byte, 3<<20)
	for i := range base {
		base[i] = byte(r.IntN(7))
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(base)) }
	hole, spans := simulate(base, 1000, len(base)+5000, map[int][]byte{len(base) + 4000: []byte("tail"), 77: []byte("x")})
	writes := must(EncodeWrites(int64(len(base)), 1000, int64(len(hole)), spans, bytes.NewReader(hole)))
	cases := map[string]struct {
		d    []byte
		want bool
	}{
		"overwrite":        {Encode(base, edit(func(b []byte) []byte { copy(b[300:], "edited"); return b })), true},
		"truncate":         {Encode(base, base[:1000]), true},
		"delete middle":    {Encode(base, edit(func(b []byte) []byte { return append(b[:500:500], b[9000:]...) })), true},
		"append":           {Encode(base, append(bytes.Clone(base), "tail"...)), true},
		"insert in middle": {Encode(base, edit(func(b []byte) []byte { return append(append(b[:500:500], "new bytes"...), base[500:]...) })), false},
		"identical":        {Encode(base, base), true},
		"written ranges":   {writes, true},
		"zstd":             {must(EncodeZstd(base[:4096], base[:4000], 1)), false},
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "text"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, c := range cases {
		b := base
		if name == "zstd" {
			b = base[:4096]
		}
		want, err := Apply(b, c.d)
		if err != nil {
			t.Fatalf("%s: Apply: %v", name, err)
		}
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if bl, tl, ok, err := InPlace(c.d); err != nil || ok != c.want || bl != uint64(len(b)) || tl != uint64(len(want)) {
			t.Errorf("%s: InPlace %v, %d -> %d bytes, %v; want %v, %d -> %d", name, ok, bl, tl, err, c.want, len(b), len(want))
		}
		n, ok, err := ApplyInPlaceAt(f, int64(len(b)), c.d)
		if err != nil || ok != c.want {
			t.Errorf("%s: in place %v, %v; want %v", name, ok, err, c.want)
			continue
		}
		got, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if ok && (n != int64(len(want)) || !bytes.Equal(got[:min(len(got), int(n))], want)) {
			t.Errorf("%s: gave %d bytes, other than Apply's %d", name, n, len(want))
		}
		if !ok && !bytes.Equal(got, b) {
			t.Errorf("%s: declined but changed the base", name)
		}
	}
	if _, _, err := ApplyInPlaceAt(&memFile{base[:10]}, 10, Encode(base, base[:5])); err == nil {
		t.Error("a base of another length was accepted")
	}
	bad := Encode(base[:100], base[:50])
	bad = append(bad[:len(bad)-1], 0xff)
	m := &memFile{bytes.Clone(base[:100])}
	if _, _, _, err := InPlace(bad); err == nil {
		t.Error("InPlace took a malformed delta")
	}
	if _, _, err := ApplyInPlaceAt(m, 100, bad); err == nil || !bytes.Equal(m.b, base[:100]) {
		t.Errorf("a malformed delta: %v, base changed %v", err, !bytes.Equal(m.b, base[:100]))
	}
}
