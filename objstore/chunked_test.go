package objstore

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
	"github.com/klauspost/compress/zstd"
)

// bigMixed returns n bytes of text with a stretch of random bytes in the
// middle (an archive inside a text file), not a multiple of chunkSize.
func bigMixed(seed uint64, n int) []byte {
	b := genText(rand.New(rand.NewPCG(seed, 1)), n)
	if n > 3*chunkSize {
		crand.Read(b[n/3 : n/3+2*chunkSize+123])
	}
	return b
}

// readChunkedPayload reads chunked payload p of a text of textLen bytes
// as a revision read does: as a record in a segment, through readRecord.
func (r *recordReader) readChunkedPayload(p []byte, textLen uint64) ([]byte, error) {
	rec := appendRecord(nil, recHeader{Flags: recFlagChunked, ID: index.RevID{File: 4, Rev: 1}, TextLen: textLen}, p)
	return r.read(rec, entryOf(rec))
}

func TestChunkedRoundTrip(t *testing.T) {
	r := newRecordReader(t)
	for _, n := range []int{1, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 4567} {
		data := bigMixed(uint64(n), n)
		p, ok := encodeChunked(data)
		if n < 1024 {
			if ok {
				t.Fatalf("%d bytes: a chunked payload no smaller than the text was accepted", n)
			}
			continue
		}
		if !ok || len(p) >= len(data) {
			t.Fatalf("%d bytes: not compressed (%d bytes)", n, len(p))
		}
		got, err := r.readChunkedPayload(p, uint64(n))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: round trip: %v", n, err)
		}
		spans, _ := parseChunkTable(p, uint64(len(p)), uint64(n))
		if n > 3*chunkSize && spans[1].codec != chunkRaw {
			t.Fatalf("random chunk stored with codec %d, want raw", spans[1].codec)
		}
		if _, err := r.readChunkedPayload(p, uint64(n)+1); !errors.Is(err, errChunked) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d bytes: decoded against the wrong length: %v", n, err)
		}
	}
}

// TestChunkedZstdChunk: a zstd chunk (which puts do not write, but the
// format allows) decodes, and one of the wrong length is refused.
func TestChunkedZstdChunk(t *testing.T) {
	r := newRecordReader(t)
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	text := genText(rand.New(rand.NewPCG(5, 5)), 10000)
	z := enc.EncodeAll(text, nil)
	// one chunk of up to 16 KiB
	p := []byte{0, 0, 0x40, 0, 0, 0, 0, 1, chunkZstd, 0, 0, byte(len(z) >> 8), byte(len(z))}
	p = append(p, z...)
	got, err := r.readChunkedPayload(p, uint64(len(text)))
	if err != nil || !bytes.Equal(got, text) {
		t.Fatalf("zstd chunk: %v", err)
	}
	if _, err := r.readChunkedPayload(p, uint64(len(text)-1)); !errors.Is(err, errChunked) {
		t.Fatalf("zstd chunk longer than its place: %v", err)
	}
}

// TestChunkedCorrupt: a payload damaged before its record was sealed
// (the checksum matches) is refused by the chunk decoders themselves.
func TestChunkedCorrupt(t *testing.T) {
	r := newRecordReader(t)
	data := bigMixed(7, 3*chunkSize+99)
	p, _ := encodeChunked(data)
	cases := map[string]func([]byte) []byte{
		"short":        func(b []byte) []byte { return b[:5] },
		"tiny chunks":  func(b []byte) []byte { b[2] = 0; b[1] = 0; b[3] = 1; return b },
		"count":        func(b []byte) []byte { b[7]++; return b },
		"codec":        func(b []byte) []byte { b[8] = 9; return b },
		"length":       func(b []byte) []byte { b[12]++; return b },
		"trailing":     func(b []byte) []byte { return append(b, 0) },
		"truncated":    func(b []byte) []byte { return b[:len(b)-1] },
		"s2 bytes":     func(b []byte) []byte { b[chunkHeaderLen+3*chunkEntryLen+10] ^= 0xff; return b },
		"raw as s2":    func(b []byte) []byte { b[chunkHeaderLen+chunkEntryLen] = chunkS2; return b },
		"s2 as zstd":   func(b []byte) []byte { b[chunkHeaderLen] = chunkZstd; return b },
		"size as text": func(b []byte) []byte { b[0], b[1], b[2], b[3] = 0xff, 0xff, 0xff, 0xff; return b },
	}
	for name, mod := range cases {
		got, err := r.readChunkedPayload(mod(bytes.Clone(p)), uint64(len(data)))
		if err == nil && bytes.Equal(got, data) && name != "s2 bytes" {
			t.Errorf("%s: decoded anyway", name)
		}
		// "short" is refused before the chunk table: a record too small
		// for its header.
		if err != nil && (!errors.Is(err, errChunked) && name != "short" || !errors.Is(err, ErrCorrupt)) {
			t.Errorf("%s: error is not errChunked and ErrCorrupt: %v", name, err)
		}
	}
}

// TestPutBigChunked: a fulltext of bigFull bytes or more is stored
// chunked, reads back, survives a reopen and verifies; an incompressible
// one is stored raw.
func TestPutBigChunked(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{LatestBytes: 16 << 20})
	f, _ := s.NewFile("big")
	data := bigMixed(3, bigFull+chunkSize/2+17)
	e, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(data)})
	if err != nil {
		t.Fatal(err)
	}
	if e.Flags&index.FlagChunked == 0 || e.Kind != index.KindFull || uint64(e.Stored) >= e.Size {
		t.Fatalf("big fulltext stored as flags %#x kind %v, %d of %d bytes", e.Flags, e.Kind, e.Stored, e.Size)
	}
	if used, n := s.latest.size(); n != 0 {
		t.Fatalf("a text of %d bytes is kept as the latest (%d bytes held): over the 16 MiB budget", len(data), used)
	}
	mid, _ := s.NewFile("mid") // over the budget, under bigFull: kept alone
	midText := genText(rand.New(rand.NewPCG(4, 4)), 20<<20)
	if _, err := s.Put(ctx, PutRequest{File: mid, Data: midText}); err != nil {
		t.Fatal(err)
	}
	// Charged its array, which the cache keeps whole (cache.go).
	if used, n := s.latest.size(); n != 1 || used != int64(cap(midText)) {
		t.Fatalf("a 20 MiB text: latest holds %d texts, %d bytes; want it alone (%d bytes)", n, used, cap(midText))
	}
	noise := make([]byte, bigFull)
	crand.Read(noise)
	g, _ := s.NewFile("noise")
	en, err := s.Put(ctx, PutRequest{File: g, Data: bytes.Clone(noise)})
	// Chunked all the same (its chunks raw), so that it is read a group
	// of chunks at a time: a few bytes over the text.
	if over := int64(en.Stored) - int64(en.Size); err != nil || en.Flags != index.FlagChunked || over < 0 || over > recOverhead+chunkHeaderLen+chunkEntryLen*(bigFull/chunkSize) {
		t.Fatalf("incompressible fulltext: flags %#x, %d of %d bytes: %v", en.Flags, en.Stored, en.Size, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Config{CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for id, want := range map[index.RevID][]byte{e.ID(): data, en.ID(): noise} {
		got, err := s2.Get(ctx, id)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("get %v after reopen: %v", id, err)
		}
	}
	if n, err := s2.Verify(ctx, func(p Problem) { t.Errorf("verify: %v", p) }); err != nil || n != 0 {
		t.Fatalf("verify: %d problems, %v", n, err)
	}
}

// TestFormat1StoreOpens: a store of format 1 (before chunked fulltexts)
// opens, takes small puts and stays format 1, readable by older builds;
// its first chunked fulltext raises it to 2.
func TestFormat1StoreOpens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := s.NewFile("small")
	small := genText(rand.New(rand.NewPCG(2, 2)), 100000)
	e1, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(small)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.idx.SetFormat(1); err != nil { // as a format 1 build left it
		t.Fatal(err)
	}
	s.Close()
	if err := writeFormat(dir, 1); err != nil {
		t.Fatal(err)
	}
	formatIs := func(want int) {
		t.Helper()
		v, err := readFormat(dir)
		if err != nil || v != want {
			t.Fatalf("FORMAT: version %d (%v), want %d", v, err, want)
		}
	}
	s, err = Open(dir, Config{})
	if err != nil {
		t.Fatalf("format 1 store: %v", err)
	}
	if got, err := s.Get(ctx, e1.ID()); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("format 1 revision: %v", err)
	}
	if _, err := s.Put(ctx, PutRequest{File: f, Data: append(bytes.Clone(small), "more\n"...), P1: e1.ID()}); err != nil {
		t.Fatal(err)
	}
	formatIs(1)
	g, _ := s.NewFile("big")
	big := bigMixed(9, bigFull)
	eb, err := s.Put(ctx, PutRequest{File: g, Data: bytes.Clone(big)})
	if err != nil || eb.Flags&index.FlagChunked == 0 {
		t.Fatalf("big put: flags %#x, %v", eb.Flags, err)
	}
	formatIs(2)
	if v, _, _ := s.idx.Format(); v != 2 {
		t.Fatalf("index format %d after a chunked record, want 2", v)
	}
	s.Close()
	s, err = Open(dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Get(ctx, eb.ID()); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("chunked revision after reopen: %v", err)
	}
	if _, err := parseFormat(dir, []byte(formatMagic+"\nformat 0\n")); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), fmt.Sprintf("1 to %d", FormatVersion)) {
		t.Fatalf("format 0: %v", err)
	}
}

// TestChunkedReadCorrupt: a flipped byte anywhere in a chunked record
// (header, table, a chunk, the checksum) makes its read fail with
// ErrCorrupt, though the read goes a few chunks at a time.
func TestChunkedReadCorrupt(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f, _ := s.NewFile("big")
	data := bigMixed(11, bigFull+5)
	e, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(data)})
	if err != nil || e.Flags&index.FlagChunked == 0 {
		t.Fatalf("put: flags %#x, %v", e.Flags, err)
	}
	s.Close()
	seg := filepath.Join(dir, "segments", segName(e.Seg))
	for _, at := range []uint64{20, recHeaderLen + 2, recHeaderLen + 12, uint64(e.Stored) / 2, uint64(e.Stored) - 3} {
		flipByte(t, seg, int64(e.Off+at), 0x20)
		s, err := Open(dir, Config{CacheBytes: 1, LatestBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, e.ID()); !errors.Is(err, ErrCorrupt) {
			t.Errorf("byte %d of the record flipped: %v, want ErrCorrupt", at, err)
		}
		s.Close()
		flipByte(t, seg, int64(e.Off+at), 0x20)
	}
	s, err = Open(dir, Config{CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Get(ctx, e.ID()); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("restored record: %v", err)
	}
}
