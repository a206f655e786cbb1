package delta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// textLike returns n deterministic bytes of word-salad text: compressible,
// repetitive at the word level, like source code or prose.
func textLike(seed uint64, n int) []byte {
	words := []string{"func", "return", "the", "delta", "index", "base", "target", "if", "err", "!=", "nil", "{", "}", "\n\t", "for", "range", "copy", "insert", "x", "y", ":=", "0", "1", "256", "//", "store", "revision"}
	r := rand.New(rand.NewPCG(seed, 1))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// edit applies a deterministic small edit (insert, delete or replace) at off.
func edit(b []byte, r *rand.Rand, off int) []byte {
	n := 1 + r.IntN(400)
	off = min(off, len(b))
	switch r.IntN(3) {
	case 0:
		return append(b[:off:off], append(randomBytes(r.Uint64(), n), b[off:]...)...)
	case 1:
		end := min(off+n, len(b))
		return append(b[:off:off], b[end:]...)
	default:
		out := bytes.Clone(b)
		end := min(off+n, len(out))
		copy(out[off:end], randomBytes(r.Uint64(), end-off))
		return out
	}
}

type pair struct {
	name         string
	base, target []byte
}

func trickyPairs() []pair {
	text := textLike(1, 300_000)
	r := rand.New(rand.NewPCG(7, 7))
	edited := bytes.Clone(text)
	for range 5 {
		edited = edit(edited, r, r.IntN(len(edited)))
	}
	zeros := make([]byte, 200_000)
	runs := bytes.Repeat([]byte("abcdefgh"), 30_000)
	blocks := bytes.Repeat(randomBytes(3, 4096), 40)
	moved := append(bytes.Clone(text[150_000:]), text[:150_000]...)
	return []pair{
		{"both empty", nil, nil},
		{"empty base", nil, text[:1000]},
		{"empty target", text[:1000], nil},
		{"identical", text, text},
		{"one byte", []byte{1}, []byte{2}},
		{"tiny", []byte("hello"), []byte("hello world")},
		{"prefix only", text, text[:1234]},
		{"suffix only", text, text[5000:]},
		{"small edits", text, edited},
		{"unrelated", randomBytes(4, 100_000), randomBytes(5, 120_000)},
		{"zeros to zeros", zeros, zeros[:150_000]},
		{"zeros to runs", zeros, runs},
		{"runs changed", runs, append(bytes.Clone(runs[:1000]), append([]byte("X"), runs[1000:]...)...)},
		{"repeated blocks", blocks, append(bytes.Clone(blocks[4096*3:]), blocks[:4096*5]...)},
		{"moved halves", text, moved},
		{"one byte flipped", text, func() []byte { b := bytes.Clone(text); b[len(b)/2] ^= 0xff; return b }()},
		{"target repeats base", text[:10_000], bytes.Repeat(text[:10_000], 7)},
	}
}

func roundTrip(t *testing.T, base, target []byte) {
	t.Helper()
	check := func(codec string, d []byte) {
		t.Helper()
		got, err := Apply(base, d)
		if err != nil {
			t.Fatalf("%s: apply: %v", codec, err)
		}
		if !bytes.Equal(got, target) {
			t.Fatalf("%s: round trip differs: got %d bytes, want %d", codec, len(got), len(target))
		}
		c, bl, tl, err := Header(d)
		if err != nil || bl != uint64(len(base)) || tl != uint64(len(target)) {
			t.Fatalf("%s: header %v %d %d %v", codec, c, bl, tl, err)
		}
	}
	check("encode", Encode(base, target))
	check("index", NewIndex(base).Encode(target))
	z, err := EncodeZstd(base, target, 2)
	if err != nil {
		t.Fatalf("zstd: %v", err)
	}
	check("zstd", z)
}

func TestRoundTrip(t *testing.T) {
	for _, p := range trickyPairs() {
		t.Run(p.name, func(t *testing.T) { roundTrip(t, p.base, p.target) })
	}
}

func TestSmallChangeSmallDelta(t *testing.T) {
	base := textLike(9, 8<<20)
	cases := map[string][]byte{
		"replace": func() []byte { b := bytes.Clone(base); b[3<<20] ^= 1; return b }(),
		"insert":  append(bytes.Clone(base[:5<<20]), append([]byte("!"), base[5<<20:]...)...),
		"delete":  append(bytes.Clone(base[:5<<20]), base[5<<20+1:]...),
	}
	for name, target := range cases {
		for _, d := range [][]byte{Encode(base, target), NewIndex(base).Encode(target)} {
			if len(d) > 40 {
				t.Errorf("%s: 1-byte change in 8 MiB gave a %d-byte delta", name, len(d))
			}
			if got, err := Apply(base, d); err != nil || !bytes.Equal(got, target) {
				t.Fatalf("%s: round trip failed: %v", name, err)
			}
		}
	}
}

func TestScatteredEditsStaySmall(t *testing.T) {
	base := textLike(11, 4<<20)
	r := rand.New(rand.NewPCG(1, 2))
	target := base
	inserted := 0
	for range 20 {
		before := len(target)
		target = edit(target, r, r.IntN(len(target)))
		inserted += max(0, len(target)-before) + 400
	}
	d := Encode(base, target)
	if len(d) > inserted+20*16 {
		t.Errorf("20 edits of <= 400 bytes gave a %d-byte delta", len(d))
	}
	roundTrip(t, base, target)
}

func TestIndexChainReuse(t *testing.T) {
	rev := textLike(12, 1<<20)
	r := rand.New(rand.NewPCG(3, 4))
	ix := NewIndex(rev)
	for i := range 30 {
		next := edit(rev, r, r.IntN(len(rev)))
		d := ix.Encode(next)
		got, err := Apply(rev, d)
		if err != nil || !bytes.Equal(got, next) {
			t.Fatalf("revision %d: %v", i, err)
		}
		if len(d) > 500 {
			t.Errorf("revision %d: small edit gave %d-byte delta", i, len(d))
		}
		rev, ix = next, NewIndex(next)
	}
}

func TestUnrelatedDeltaIsAboutTheTarget(t *testing.T) {
	base, target := randomBytes(21, 1<<20), randomBytes(22, 1<<20)
	d := Encode(base, target)
	if len(d) > len(target)+16 {
		t.Errorf("unrelated inputs: delta %d bytes for a %d-byte target", len(d), len(target))
	}
}

func TestApplyRejectsBadDeltas(t *testing.T) {
	base := textLike(31, 50_000)
	target := append(bytes.Clone(base[:20_000]), append([]byte("new text here, quite a lot of it"), base[25_000:]...)...)
	good := Encode(base, target)
	hdr := appendHeader(nil, CodecCopy, uint64(len(base)), 10)
	cases := map[string][]byte{
		"empty":           nil,
		"unknown codec":   append([]byte{9}, good[1:]...),
		"zero length":     append(bytes.Clone(hdr), 0),
		"copy past base":  binary.AppendVarint(append(bytes.Clone(hdr), 10<<2|opCopy), int64(len(base))-5),
		"negative copy":   append(bytes.Clone(hdr), 10<<2|opCopy, 0x03),
		"short insert":    append(bytes.Clone(hdr), 10<<2|opInsert, 'a', 'b'),
		"too long":        append(bytes.Clone(hdr), 11<<2|opInsert, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k'),
		"too short":       append(bytes.Clone(hdr), 2<<2|opInsert, 'a', 'b'),
		"trailing":        append(bytes.Clone(good), 0x04, 'x'),
		"huge target":     appendHeader(nil, CodecCopy, uint64(len(base)), 1<<62),
		"varint overflow": append(bytes.Clone(hdr), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"reserved op":     append(bytes.Clone(hdr), 10<<2|3),
		"run no byte":     append(bytes.Clone(hdr), 10<<2|opRun),
		"zstd garbage":    append(appendHeader(nil, CodecZstd, uint64(len(base)), 100), "not a zstd frame"...),
	}
	for name, d := range cases {
		if _, err := Apply(base, d); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := Apply(base[:100], good); !errors.Is(err, ErrBaseMismatch) {
		t.Errorf("wrong base: got %v, want ErrBaseMismatch", err)
	}
	for i := range len(good) {
		if out, err := Apply(base, good[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: no error, %d bytes out", i, len(out))
		}
	}
}

func TestAppendApplyKeepsDst(t *testing.T) {
	base, target := textLike(41, 1000), textLike(42, 1000)
	dst := []byte("prefix:")
	out, err := AppendApply(dst, base, Encode(base, target))
	if err != nil || !bytes.Equal(out, append([]byte("prefix:"), target...)) {
		t.Fatalf("AppendApply: %v", err)
	}
	out, err = AppendApply(dst, base, []byte{1, 0})
	if err == nil || !bytes.Equal(out, []byte("prefix:")) {
		t.Fatalf("AppendApply on error changed dst: %q %v", out, err)
	}
}

func TestApplyStreamMatchesApply(t *testing.T) {
	for _, p := range trickyPairs() {
		for _, d := range [][]byte{Encode(p.base, p.target), must(EncodeZstd(p.base, p.target, 1))} {
			var out bytes.Buffer
			if err := ApplyStream(&out, bytes.NewReader(p.base), int64(len(p.base)), d); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			if !bytes.Equal(out.Bytes(), p.target) {
				t.Fatalf("%s: stream output differs", p.name)
			}
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
