package objstore

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// inPlace writes n random bytes into a copy of text at a random offset and
// returns it with the delta EncodeWrites builds from that one span.
func inPlace(t testing.TB, r *rand.Rand, text []byte, n int) ([]byte, []byte) {
	t.Helper()
	next := bytes.Clone(text)
	off := r.IntN(len(text) - n)
	for i := range n {
		next[off+i] = byte(r.Uint32())
	}
	d, err := delta.EncodeWrites(int64(len(text)), int64(len(text)), int64(len(next)),
		[]delta.Span{{Off: int64(off), Len: int64(n)}}, bytes.NewReader(next))
	if err != nil {
		t.Fatal(err)
	}
	return next, d
}

func deltaOnly(f index.FileID, p1 index.RevID, d []byte, size int) PutRequest {
	return PutRequest{File: f, P1: p1, Delta: d, DeltaBase: p1, DeltaOnly: true, Size: uint64(size)}
}

// deltaFile is a fresh store with one file whose first revision is size
// bytes of genText, put as a fulltext: where the tests of puts from
// deltas alone start.
type deltaFile struct {
	s     *Store
	dir   string
	r     *rand.Rand
	f     index.FileID
	text  []byte      // the newest revision's text
	prev  index.RevID // the newest revision
	texts map[index.RevID][]byte
}

func newDeltaFile(t testing.TB, cfg Config, seed uint64, size int) *deltaFile {
	t.Helper()
	s, dir := openNew(t, cfg)
	d := &deltaFile{s: s, dir: dir, r: rand.New(rand.NewPCG(seed, seed+1)), f: mustNewFile(t, s, "f")}
	d.text = genText(d.r, size)
	d.prev = mustPut(t, s, PutRequest{File: d.f, Data: d.text}).ID()
	d.texts = map[index.RevID][]byte{d.prev: d.text}
	return d
}

// putDeltas puts n revisions from deltas alone, each writing span random
// bytes in place into the last, and returns their entries.
func (d *deltaFile) putDeltas(t testing.TB, n, span int) []index.Entry {
	t.Helper()
	var es []index.Entry
	for range n {
		next, dl := inPlace(t, d.r, d.text, span)
		e := mustPut(t, d.s, deltaOnly(d.f, d.prev, dl, len(next)))
		d.texts[e.ID()], d.text, d.prev = next, next, e.ID()
		es = append(es, e)
	}
	return es
}

// TestPutDeltaOnly: revisions put from a delta alone read back identical,
// hash nothing and verify clean.
func TestPutDeltaOnly(t *testing.T) {
	df := newDeltaFile(t, Config{}, 1, 4<<20)
	s, f := df.s, df.f
	before := mustStats(t, s).HashedBytes
	for _, e := range df.putDeltas(t, 10, 4096) {
		if e.Flags&index.FlagHashDeferred == 0 || e.Hash != 0 || e.Kind != index.KindP1 {
			t.Fatalf("entry %+v: want a p1 delta with a deferred hash", e)
		}
	}
	if got := mustStats(t, s).HashedBytes - before; got != 0 {
		t.Errorf("delta-only puts hashed %d bytes, want 0", got)
	}
	text, prev := df.text, df.prev
	for id, want := range df.texts {
		if got := mustGet(t, s, id); !bytes.Equal(got, want) {
			t.Fatalf("%v reads back %d different bytes", id, len(got))
		}
	}
	verifyClean(t, s)
	// A fulltext put after them deltas against the newest, and dedup does
	// not offer a deferred revision as a candidate.
	e := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text), P1: prev})
	if e.Kind != index.KindP1 || e.Flags&index.FlagHashDeferred != 0 {
		t.Fatalf("fulltext put after deltas: %+v", e)
	}
	if got := mustGet(t, s, e.ID()); !bytes.Equal(got, text) {
		t.Fatal("fulltext put after deltas reads back different bytes")
	}
	if filled := s.WithContentHash(mustEntry(t, s, prev), text); filled.Hash != s.cfg.hash(text) || filled.Flags&index.FlagHashDeferred != 0 {
		t.Errorf("WithContentHash: %+v", filled)
	}
}

func mustStats(t testing.TB, s *Store) Stats {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func mustEntry(t testing.TB, s *Store, id index.RevID) index.Entry {
	t.Helper()
	e, err := s.Entry(id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestPutDeltaOnlyRejects: a delta that does not fit its base, its size or
// its instruction stream is refused, and nothing is stored.
func TestPutDeltaOnlyRejects(t *testing.T) {
	df := newDeltaFile(t, Config{}, 3, 64<<10)
	s, r, f, text, p := df.s, df.r, df.f, df.text, df.prev
	next, d := inPlace(t, r, text, 100)
	short, _ := inPlace(t, r, text[:1000], 10)
	_, dShort := inPlace(t, r, short, 10)
	bad := map[string]PutRequest{
		"size":      deltaOnly(f, p, d, len(next)+1),
		"base":      deltaOnly(f, p, dShort, len(short)),
		"truncated": deltaOnly(f, p, d[:len(d)-3], len(next)),
		"no parent": deltaOnly(f, index.RevID{}, d, len(next)),
		"zstd":      deltaOnly(f, p, []byte{byte(delta.CodecZstd), 0x80, 0x80, 0x04, 0x80, 0x80, 0x04}, len(next)),
	}
	for name, req := range bad {
		if _, err := s.Put(context.Background(), req); err == nil || errors.Is(err, ErrNeedFulltext) {
			t.Errorf("%s: Put = %v, want a rejection", name, err)
		}
	}
	if m, err := s.File(f); err != nil || m.Revs != 1 {
		t.Fatalf("after rejections: %d revisions, %v; want 1", m.Revs, err)
	}
}

// TestPutDeltaOnlyChainCap: at the chain cap a delta-only put says it needs
// the fulltext, and the fulltext put then starts a fresh chain.
func TestPutDeltaOnlyChainCap(t *testing.T) {
	df := newDeltaFile(t, Config{MaxChainLen: 4}, 5, 256<<10)
	s, r, f, text, prev := df.s, df.r, df.f, df.text, df.prev
	fallbacks := 0
	for range 12 {
		next, d := inPlace(t, r, text, 512)
		e, err := s.Put(context.Background(), deltaOnly(f, prev, d, len(next)))
		if errors.Is(err, ErrNeedFulltext) {
			fallbacks++
			e = mustPut(t, s, PutRequest{File: f, Data: next, P1: prev})
		} else if err != nil {
			t.Fatal(err)
		}
		if e.ChainLen > 4 {
			t.Fatalf("%v: chain of %d past the cap of 4", e.ID(), e.ChainLen)
		}
		if got := mustGet(t, s, e.ID()); !bytes.Equal(got, next) {
			t.Fatalf("%v reads back different bytes", e.ID())
		}
		text, prev = next, e.ID()
	}
	if fallbacks == 0 {
		t.Fatal("12 revisions under a chain cap of 4 never needed a fulltext")
	}
	verifyClean(t, s)
}

// TestPutDeltaOnlyBitFlip: a flipped bit in a deferred-hash revision's
// record is caught by the record checksum, by Get and by Verify.
func TestPutDeltaOnlyBitFlip(t *testing.T) {
	df := newDeltaFile(t, Config{}, 7, 256<<10)
	s, dir, r, f, text, p := df.s, df.dir, df.r, df.f, df.text, df.prev
	next, d := inPlace(t, r, text, 300)
	e := mustPut(t, s, deltaOnly(f, p, d, len(next)))
	s.Close()
	for _, at := range []uint64{recHeaderLen, uint64(e.Stored) - recTrailerLen - 1} {
		flipByte(t, filepath.Join(dir, "segments", segName(e.Seg)), int64(e.Off+at), 0x10)
		s2, err := Open(dir, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s2.Get(context.Background(), e.ID()); !errors.Is(err, ErrCorrupt) {
			t.Errorf("flip at %d: Get = %v, want ErrCorrupt", at, err)
		}
		n, err := s2.Verify(context.Background(), func(Problem) {})
		if err != nil || n != 1 {
			t.Errorf("flip at %d: Verify found %d problems (%v), want 1", at, n, err)
		}
		s2.Close()
		flipByte(t, filepath.Join(dir, "segments", segName(e.Seg)), int64(e.Off+at), 0x10) // undo
	}
}

// TestPutDeltaOnlyBig: a delta of at least bigDelta bytes (many scattered
// writes of text) is compressed as concatenated zstd frames on every core
// and reads back identical through the ordinary zstd reader.
func TestPutDeltaOnlyBig(t *testing.T) {
	df := newDeltaFile(t, Config{}, 3, 64<<20)
	s, r, f, text, prev := df.s, df.r, df.f, df.text, df.prev
	next, src := bytes.Clone(text), genText(r, 1<<20)
	var spans []delta.Span
	for off := int64(0); off+4096 <= int64(len(next)); off += 4 * 4096 { // a quarter of the file
		at := r.IntN(len(src) - 4096)
		copy(next[off:off+4096], src[at:at+4096])
		spans = append(spans, delta.Span{Off: off, Len: 4096})
	}
	d, err := delta.EncodeWrites(int64(len(text)), int64(len(text)), int64(len(next)), spans, bytes.NewReader(next))
	if err != nil {
		t.Fatal(err)
	}
	if len(d) < 2*bigDelta {
		t.Fatalf("delta of %d bytes: want several chunks of %d", len(d), chunkSize)
	}
	e := mustPut(t, s, deltaOnly(f, prev, d, len(next)))
	if e.Flags.RecordFlags()&recFlagZstd == 0 || int(e.Stored) > len(d)*3/4 {
		t.Fatalf("a %d-byte delta of text stored in %d bytes, flags %#x: want zstd", len(d), e.Stored, e.Flags)
	}
	if got := mustGet(t, s, e.ID()); !bytes.Equal(got, next) {
		t.Fatalf("reads back %d different bytes", len(got))
	}
	verifyClean(t, s)
}

// TestCompressFramesIsOneStream: the frames decode as one payload.
func TestCompressFramesIsOneStream(t *testing.T) {
	s, _ := openNew(t, Config{})
	b := genText(rand.New(rand.NewPCG(5, 6)), bigDelta+chunkSize/2)
	z, flags := compressFrames(b)
	if flags != recFlagZstd || len(z) >= len(b) {
		t.Fatalf("%d bytes of text compressed to %d, flags %#x", len(b), len(z), flags)
	}
	got, err := s.dec.DecodeAll(z, nil)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("decoded %d bytes (want %d), %v", len(got), len(b), err)
	}
}
