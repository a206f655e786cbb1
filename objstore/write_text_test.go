package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// TestWriteText copies a chunked fulltext, and a dedup of one, into a
// file byte-exact; rebuilds a delta on it in the file, never whole in
// memory, and so a chain of in-place writes, an append and a truncation
// (delta-only puts, their hashes deferred); declines, for Get, a delta
// that moves bytes backwards (an insertion) and any delta when the
// writer is not a file; and fails with ErrCorrupt on a flipped byte
// anywhere in the fulltext's record or in a delta's.
func TestWriteText(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f, _ := s.NewFile("big")
	data := bigMixed(21, bigFull+3*chunkSize+5)
	full, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(data)})
	if err != nil || full.Flags&index.FlagChunked == 0 {
		t.Fatalf("put: flags %#x, %v", full.Flags, err)
	}
	g, _ := s.NewFile("copy")
	dup, err := s.Put(ctx, PutRequest{File: g, Data: bytes.Clone(data)})
	if err != nil || dup.Kind != index.KindDedup {
		t.Fatalf("copy: kind %v, %v", dup.Kind, err)
	}
	edited := bytes.Clone(data)
	copy(edited[bigFull/2:], "edited")
	edit, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(edited), P1: full.ID()})
	if err != nil || edit.Kind == index.KindFull {
		t.Fatalf("edit: kind %v, %v", edit.Kind, err)
	}
	want := map[index.RevID][]byte{full.ID(): data, dup.ID(): data, edit.ID(): edited}
	// In-place writes, an append, a truncation: a chain of delta-only puts.
	r := rand.New(rand.NewPCG(2, 2))
	text, last := edited, edit
	for i, n := range []int{4096, 100, 1 << 20} {
		next, d := inPlace(t, r, text, n)
		if i == 1 {
			next = append(bytes.Clone(text), "appended"...)
			d, err = delta.EncodeWrites(int64(len(text)), int64(len(text)), int64(len(next)), []delta.Span{{Off: int64(len(text)), Len: 8}}, bytes.NewReader(next))
			if err != nil {
				t.Fatal(err)
			}
		}
		last = mustPut(t, s, deltaOnly(f, last.ID(), d, len(next)))
		text, want[last.ID()] = next, next
	}
	short := text[:len(text)-chunkSize-3]
	d, err := delta.EncodeWrites(int64(len(text)), int64(len(short)), int64(len(short)), nil, bytes.NewReader(short))
	if err != nil {
		t.Fatal(err)
	}
	last = mustPut(t, s, deltaOnly(f, last.ID(), d, len(short)))
	want[last.ID()] = short
	inserted := append(append(bytes.Clone(data[:1000]), "inserted"...), data[1000:]...)
	ins := mustPut(t, s, PutRequest{File: g, Data: inserted, P1: dup.ID()})

	out := filepath.Join(t.TempDir(), "out")
	write := func(s *Store, id index.RevID, file bool) (bool, []byte, error) {
		w, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var to io.WriterAt = w
		if !file {
			to = io.NewOffsetWriter(w, 0)
		}
		ok, err := s.WriteText(ctx, id, to)
		b, _ := os.ReadFile(out)
		return ok, b, err
	}
	rebuilt := s.rebuiltBytes.Load()
	for id, text := range want {
		if ok, b, err := write(s, id, true); !ok || err != nil || !bytes.Equal(b, text) {
			t.Fatalf("%v: ok %v, %d bytes (want %d), %v", id, ok, len(b), len(text), err)
		}
	}
	if n := s.rebuiltBytes.Load() - rebuilt; n != 0 {
		t.Errorf("WriteText rebuilt %d bytes in memory", n)
	}
	if ok, b, err := write(s, ins.ID(), true); ok || err != nil || len(b) != 0 || ins.Kind == index.KindFull {
		t.Fatalf("insertion %v (kind %v): ok %v, %d bytes written, %v; want declined before writing", ins.ID(), ins.Kind, ok, len(b), err)
	}
	// A chain whose file would grow past the text by more than the slack
	// the spill checked room for (the truncation: a root 4 MiB longer).
	defer func(g uint64) { inPlaceGrowth = g }(inPlaceGrowth)
	inPlaceGrowth = 1 << 20
	if ok, b, err := write(s, last.ID(), true); ok || err != nil || len(b) != 0 {
		t.Fatalf("a truncated revision past the growth bound: ok %v, %d bytes written, %v; want declined before writing", ok, len(b), err)
	}
	inPlaceGrowth = 512 << 20
	if ok, b, err := write(s, edit.ID(), false); ok || err != nil || len(b) != 0 {
		t.Fatalf("delta %v to a writer that is not a file: ok %v, %d bytes written, %v; want declined", edit.ID(), ok, len(b), err)
	}
	s.Close()
	seg := filepath.Join(dir, "segments", segName(edit.Seg))
	at := int64(edit.Off + uint64(edit.Stored) - 3)
	flipByte(t, seg, at, 0x20)
	s2, err := Open(dir, Config{CacheBytes: 1, LatestBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := write(s2, last.ID(), true); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a byte of a delta on the chain flipped: %v, want ErrCorrupt", err)
	}
	s2.Close()
	flipByte(t, seg, at, 0x20)
	seg = filepath.Join(dir, "segments", segName(full.Seg))
	for _, at := range []uint64{20, recHeaderLen + 12, uint64(full.Stored) / 2, uint64(full.Stored) - 3} {
		flipByte(t, seg, int64(full.Off+at), 0x20)
		s, err := Open(dir, Config{CacheBytes: 1, LatestBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := write(s, full.ID(), true); !errors.Is(err, ErrCorrupt) {
			t.Errorf("byte %d of the record flipped: %v, want ErrCorrupt", at, err)
		}
		s.Close()
		flipByte(t, seg, int64(full.Off+at), 0x20)
	}
}

// TestBigFulltextsStayChunked: a big fulltext is stored chunked whatever
// its content, by a put and by a repack (which compresses its chunks with
// zstd), so that WriteText copies it, and rebuilds a delta on it, a group
// of chunks at a time; a repack used to store it as one zstd stream, and
// a put an incompressible one raw, which only Get could read, whole.
func TestBigFulltextsStayChunked(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	noise := make([]byte, bigFull+chunkSize/2)
	rand.NewChaCha8([32]byte{7}).Read(noise)
	texts := map[string][]byte{"noise": noise, "mixed": bigMixed(31, bigFull+chunkSize+3)}
	want := map[index.RevID][]byte{}
	for name, text := range texts {
		f := mustNewFile(t, s, name)
		e := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text)})
		edited := bytes.Clone(text)
		copy(edited[len(edited)/2:], "edited")
		d := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(edited), P1: e.ID()})
		want[e.ID()], want[d.ID()] = text, edited
	}
	check := func(s *Store, when string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		for id, text := range want {
			e, err := s.Entry(id)
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind == index.KindFull && e.Flags&index.FlagChunked == 0 {
				t.Errorf("%s: fulltext %v stored unchunked (flags %v)", when, id, e.Flags)
			}
			w, err := os.Create(out)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := s.WriteText(ctx, id, w)
			w.Close()
			got, _ := os.ReadFile(out)
			if !ok || err != nil || !bytes.Equal(got, text) {
				t.Errorf("%s: WriteText %v: ok %v, %v, %d bytes (want %d)", when, id, ok, err, len(got), len(text))
			}
		}
	}
	check(s, "put")
	s.Close()
	mustRepack(t, dir, RepackOptions{Reuse: ReuseNever})
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s, "repack")
	verifyClean(t, s)
}
