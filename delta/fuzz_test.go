package delta

import (
	"bytes"
	"testing"
)

func FuzzApply(f *testing.F) {
	for _, p := range trickyPairs()[:10] {
		if len(p.base) > 4096 || len(p.target) > 4096 {
			continue
		}
		f.Add(p.base, Encode(p.base, p.target))
		f.Add(p.base, must(EncodeZstd(p.base, p.target, 1)))
	}
	base := textLike(5, 2000)
	f.Add(base, Encode(base, textLike(6, 2000)))
	f.Add(base, Encode(base, append(bytes.Clone(base[:900]), base[1000:]...)))
	hole, spans := simulate(base, 100, 3000, map[int][]byte{2500: []byte("tail")})
	f.Add(base, must(EncodeWrites(int64(len(base)), 100, int64(len(hole)), spans, bytes.NewReader(hole))))
	f.Fuzz(func(t *testing.T, base, d []byte) {
		out, err := Apply(base, d)
		// ApplyInPlace over a copy of the base (with room to grow) agrees:
		// where it applies, the same bytes; where it declines, the base
		// untouched; never a delta Apply refuses.
		own := append(make([]byte, 0, len(base)+len(out)), base...)
		in, ok, ierr := ApplyInPlace(own, d)
		switch {
		case err != nil && ok:
			t.Fatalf("ApplyInPlace took a delta Apply refuses (%v)", err)
		case err == nil && ierr != nil:
			t.Fatalf("ApplyInPlace refused a delta Apply takes: %v", ierr)
		case ok && !bytes.Equal(in, out):
			t.Fatal("ApplyInPlace gave other bytes than Apply")
		case !ok && !bytes.Equal(own, base):
			t.Fatal("ApplyInPlace declined but changed the base")
		}
		// ApplyInPlaceAt over the base in a file agrees with ApplyInPlace
		// on a delta Apply takes, and never takes one it refuses.
		m := &memFile{bytes.Clone(base)}
		n, fok, ferr := ApplyInPlaceAt(m, int64(len(base)), d)
		switch {
		case err != nil && fok && ferr == nil:
			t.Fatalf("ApplyInPlaceAt took a delta Apply refuses (%v)", err)
		case err == nil && (fok != ok || ferr != nil):
			t.Fatalf("ApplyInPlaceAt: %v, %v; ApplyInPlace: %v", fok, ferr, ok)
		case fok && ferr == nil && (n != int64(len(out)) || !bytes.Equal(m.b[:n], out)):
			t.Fatal("ApplyInPlaceAt gave other bytes than Apply")
		case !fok && !bytes.Equal(m.b, base):
			t.Fatal("ApplyInPlaceAt declined but changed the base")
		}
		if err != nil {
			return
		}
		_, _, tl, herr := Header(d)
		if herr != nil || uint64(len(out)) != tl {
			t.Fatalf("accepted delta: %d bytes out, header says %d (%v)", len(out), tl, herr)
		}
		var buf bytes.Buffer
		if err := ApplyStream(&buf, bytes.NewReader(base), int64(len(base)), d); err != nil || !bytes.Equal(buf.Bytes(), out) {
			t.Fatalf("ApplyStream disagrees with Apply: %v", err)
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	for _, p := range trickyPairs() {
		if len(p.base) <= 4096 && len(p.target) <= 4096 {
			f.Add(p.base, p.target)
		}
	}
	text := textLike(8, 3000)
	f.Add(text, append(bytes.Clone(text[:1500]), append([]byte("inserted"), text[1500:]...)...))
	f.Add(bytes.Repeat([]byte{0}, 1000), bytes.Repeat([]byte{0}, 1001))
	f.Add(text, append(bytes.Clone(text[:700]), text[900:]...)) // in place
	f.Fuzz(func(t *testing.T, base, target []byte) {
		for name, d := range map[string][]byte{
			"encode": Encode(base, target),
			"index":  NewIndex(base).Encode(target),
		} {
			got, err := Apply(base, d)
			if err != nil || !bytes.Equal(got, target) {
				t.Fatalf("%s: round trip failed: %v", name, err)
			}
			own := append(make([]byte, 0, max(len(base), len(target))), base...)
			if in, ok, err := ApplyInPlace(own, d); err != nil || ok && !bytes.Equal(in, target) || !ok && !bytes.Equal(own, base) {
				t.Fatalf("%s: in place: ok %v, %v", name, ok, err)
			}
		}
		z, err := EncodeZstd(base, target, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Apply(base, z); err != nil || !bytes.Equal(got, target) {
			t.Fatalf("zstd: round trip failed: %v", err)
		}
	})
}
