package delta

import (
	"bytes"
	"errors"
	"testing"
)

// simulate applies writes and a truncation to base the way a file would.
func simulate(base []byte, truncTo int, newLen int, writes map[int][]byte) (target []byte, spans []Span) {
	target = make([]byte, newLen)
	copy(target, base[:min(truncTo, newLen)])
	var offs []int
	for off := range writes {
		offs = append(offs, off)
	}
	for i := range offs { // insertion sort: tests use a handful
		for j := i; j > 0 && offs[j] < offs[j-1]; j-- {
			offs[j], offs[j-1] = offs[j-1], offs[j]
		}
	}
	for _, off := range offs {
		copy(target[off:], writes[off])
		spans = append(spans, Span{int64(off), int64(len(writes[off]))})
	}
	return target, spans
}

func TestEncodeWrites(t *testing.T) {
	base := textLike(1, 1<<20)
	cases := []struct {
		name          string
		trunc, newLen int
		writes        map[int][]byte
	}{
		{"no writes", len(base), len(base), nil},
		{"one 4k write", len(base), len(base), map[int][]byte{4096 * 7: bytes.Repeat([]byte("w"), 4096)}},
		{"append", len(base), len(base) + 100, map[int][]byte{len(base): bytes.Repeat([]byte("a"), 100)}},
		{"write past end leaves hole", len(base), len(base) + 5000, map[int][]byte{len(base) + 4000: bytes.Repeat([]byte("z"), 1000)}},
		{"truncate then extend", 1000, 3000, map[int][]byte{2000: []byte("tail")}},
		{"truncate to zero and rewrite", 0, 10, map[int][]byte{0: []byte("0123456789")}},
		{"shrink", len(base), 500, nil},
		{"several", len(base), len(base), map[int][]byte{0: []byte("head"), 500_000: []byte("middle"), len(base) - 3: []byte("end")}},
	}
	for _, c := range cases {
		target, spans := simulate(base, c.trunc, c.newLen, c.writes)
		d, err := EncodeWrites(int64(len(base)), int64(min(c.trunc, c.newLen)), int64(len(target)), spans, bytes.NewReader(target))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := Apply(base, d)
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("%s: round trip failed: %v", c.name, err)
		}
		written := 0
		for _, w := range c.writes {
			written += len(w)
		}
		if len(d) > written+40 {
			t.Errorf("%s: %d bytes written gave a %d-byte delta", c.name, written, len(d))
		}
	}
}

func TestEncodeWritesRejectsBadSpans(t *testing.T) {
	r := bytes.NewReader(make([]byte, 100))
	for name, spans := range map[string][]Span{
		"overlap":  {{0, 10}, {5, 10}},
		"unsorted": {{50, 10}, {0, 10}},
		"empty":    {{5, 0}},
		"past end": {{95, 10}},
		"negative": {{-1, 5}},
	} {
		if _, err := EncodeWrites(100, 100, 100, spans, r); !errors.Is(err, ErrSpans) {
			t.Errorf("%s: got %v, want ErrSpans", name, err)
		}
	}
	if _, err := EncodeWrites(100, 101, 200, nil, r); !errors.Is(err, ErrSpans) {
		t.Errorf("kept past base: got %v", err)
	}
}
