package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// srcFile writes data to a file of its own and returns it open.
func srcFile(t testing.TB, data []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// putFrom puts src's content as a new file's first revision, durably,
// and checks that read was called once.
func putFrom(t testing.TB, s *Store, name string, src io.ReaderAt, size int64, req PutRequest) index.Entry {
	t.Helper()
	if req.File == 0 {
		req.File = mustNewFile(t, s, name)
	}
	var reads atomic.Int32
	e, commit, err := s.PutFrom(context.Background(), req, src, size, func() { reads.Add(1) })
	if err == nil {
		err = commit()
	}
	if err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("put %s: read signalled %d times", name, n)
	}
	return e
}

// segmentsSize returns the bytes of every segment file of the store in dir.
func segmentsSize(t testing.TB, dir string) int64 {
	t.Helper()
	ns, err := listSegments(filepath.Join(dir, "segments"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, seg := range ns {
		fi, err := os.Stat(filepath.Join(dir, "segments", segName(seg)))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestPutFromStreams: a big new file's first revision is streamed into a
// chunked record (its random stretch raw, the text S2 where an encoder
// got to it) while other files are put; it reads back, hashes as a put of the text would, survives a
// reopen and verifies.
func TestPutFromStreams(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	data := bigMixed(11, bigFull+3*chunkSize+4321)
	var wg sync.WaitGroup
	small := make([]index.RevID, 8)
	for i := range small {
		f := mustNewFile(t, s, fmt.Sprint("small", i))
		wg.Go(func() {
			e, err := s.Put(ctx, PutRequest{File: f, Data: genText(rand.New(rand.NewPCG(uint64(i), 3)), 5000)})
			if err != nil {
				t.Error(err)
			}
			small[i] = e.ID()
		})
	}
	e := putFrom(t, s, "big", srcFile(t, data), int64(len(data)), PutRequest{})
	wg.Wait()
	// Chunks the encoders did not get to in time (a loaded machine) are
	// raw, and the revision is then marked for a repack to compress.
	if e.Kind != index.KindFull || e.Flags&index.FlagChunked == 0 || e.Size != uint64(len(data)) ||
		uint64(e.Stored) >= e.Size && e.Flags&index.FlagFastZstd == 0 {
		t.Fatalf("streamed: kind %v flags %v, %d of %d bytes", e.Kind, e.Flags, e.Stored, e.Size)
	}
	if e.Hash != s.cfg.hash(data) {
		t.Fatalf("hash %x, want the text's %x", e.Hash, s.cfg.hash(data))
	}
	if !bytes.Equal(mustGet(t, s, e.ID()), data) {
		t.Fatal("streamed revision reads back different bytes")
	}
	verifyClean(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Config{CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !bytes.Equal(mustGet(t, s, e.ID()), data) {
		t.Fatal("streamed revision reads back different bytes after a reopen")
	}
	for i, id := range small {
		if !bytes.Equal(mustGet(t, s, id), genText(rand.New(rand.NewPCG(uint64(i), 3)), 5000)) {
			t.Fatalf("%v put beside the stream reads back different bytes", id)
		}
	}
	verifyClean(t, s)
}

// TestPutFromRawChunksRecompressedByRepack: chunks the appender stored
// raw (no encoder: every one) mark the revision FlagFastZstd; it reads
// back, and a repack, --reuse=auto included, compresses it and clears
// the mark.
func TestPutFromRawChunksRecompressedByRepack(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{encoders: -1})
	data := bigMixed(12, bigFull+chunkSize+99)
	e := putFrom(t, s, "big", srcFile(t, data), int64(len(data)), PutRequest{})
	if e.Flags != index.FlagChunked|index.FlagLateTable|index.FlagFastZstd || uint64(e.Stored) <= e.Size {
		t.Fatalf("all raw: flags %v, %d of %d bytes", e.Flags, e.Stored, e.Size)
	}
	if !bytes.Equal(mustGet(t, s, e.ID()), data) {
		t.Fatal("raw chunks read back different bytes")
	}
	verifyClean(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Repack(ctx, dir, RepackOptions{Reuse: ReuseAuto}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	re, err := s.idx.Entry(e.ID())
	if err != nil {
		t.Fatal(err)
	}
	if re.Flags&index.FlagFastZstd != 0 || re.Stored*2 > e.Stored {
		t.Fatalf("after repack: flags %v, %d bytes (was %d)", re.Flags, re.Stored, e.Stored)
	}
	if !bytes.Equal(mustGet(t, s, e.ID()), data) {
		t.Fatal("repacked revision reads back different bytes")
	}
	verifyClean(t, s)
}

// TestPutFromFallsBack: a source whose length is not the size given (it
// changed), a revision of the same content (dedup), a small text, a put
// with a parent: each is put from the whole text, and nothing a stream
// wrote is left in the segments.
func TestPutFromFallsBack(t *testing.T) {
	s, dir := openNew(t, Config{})
	data := bigMixed(13, bigFull+chunkSize+7)
	src := srcFile(t, data)
	for _, c := range []struct {
		name string
		size int64
	}{{"grown", int64(len(data)) - chunkSize}, {"shrunk", int64(len(data)) + 1}, {"shrunk a chunk", int64(len(data)) + 2*chunkSize}} {
		before := segmentsSize(t, dir)
		e := putFrom(t, s, c.name, src, c.size, PutRequest{})
		if e.Size != uint64(len(data)) || !bytes.Equal(mustGet(t, s, e.ID()), data) {
			t.Fatalf("%s: stored %d bytes, want the source's %d", c.name, e.Size, len(data))
		}
		if grew := segmentsSize(t, dir) - before; grew != int64(e.Stored) {
			t.Fatalf("%s: segments grew %d bytes for a record of %d", c.name, grew, e.Stored)
		}
		if c.name == "grown" {
			first := e
			e = putFrom(t, s, "again", src, int64(len(data)), PutRequest{})
			if e.Kind != index.KindDedup || e.Base != first.ID() {
				t.Fatalf("same content again: kind %v base %v, want a dedup of %v", e.Kind, e.Base, first.ID())
			}
		}
	}
	text := genText(rand.New(rand.NewPCG(1, 1)), 1<<20)
	e := putFrom(t, s, "small", srcFile(t, text), int64(len(text)), PutRequest{})
	if e.Flags != index.FlagZstd || !bytes.Equal(mustGet(t, s, e.ID()), text) {
		t.Fatalf("small text: flags %v", e.Flags)
	}
	edited := bytes.Clone(data)
	copy(edited[100:], "an edit")
	f := mustNewFile(t, s, "parent")
	p := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(data)})
	e = putFrom(t, s, "child", srcFile(t, edited), int64(len(edited)), PutRequest{File: f, P1: p.ID()})
	if e.Kind == index.KindFull || e.Stored > 1<<20 || !bytes.Equal(mustGet(t, s, e.ID()), edited) {
		t.Fatalf("with a parent: kind %v, %d bytes stored; want a small delta", e.Kind, e.Stored)
	}
	verifyClean(t, s)
}

// cancelAfter cancels a context once its reader has read n bytes.
type cancelAfter struct {
	r      io.ReaderAt
	n      atomic.Int64
	cancel func()
}

func (c *cancelAfter) ReadAt(b []byte, off int64) (int, error) {
	if c.n.Add(int64(len(b))) <= 0 {
		c.cancel()
	}
	return c.r.ReadAt(b, off)
}

// TestPutFromCancelled: a stream cancelled midway stores nothing, leaves
// nothing past the tail, and the store takes the next put.
func TestPutFromCancelled(t *testing.T) {
	s, dir := openNew(t, Config{})
	data := bigMixed(14, bigFull+5*chunkSize)
	f := mustNewFile(t, s, "big")
	before := segmentsSize(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	src := &cancelAfter{r: srcFile(t, data), cancel: cancel}
	src.n.Store(-3 * chunkSize)
	if _, _, err := s.PutFrom(ctx, PutRequest{File: f}, src, int64(len(data)), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled stream: %v", err)
	}
	if n := segmentsSize(t, dir); n != before {
		t.Fatalf("segments hold %d bytes after a cancelled stream, %d before", n, before)
	}
	if m, err := s.File(f); err != nil || m.Revs != 0 {
		t.Fatalf("file after a cancelled stream: %+v, %v", m, err)
	}
	e := putFrom(t, s, "", srcFile(t, data), int64(len(data)), PutRequest{File: f})
	if e.Rev != 0 || !bytes.Equal(mustGet(t, s, e.ID()), data) {
		t.Fatalf("put after a cancelled stream: %v", e.ID())
	}
	verifyClean(t, s)
}

// TestPutFromRaisesFormat1: on a store a format 1 build left, a small
// PutFrom keeps format 1 and a streamed one raises it to 3 (its record
// has a late table) before its record is written; both read back after
// a reopen.
func TestPutFromRaisesFormat1(t *testing.T) {
	dir := t.TempDir()
	s := openAtFormat(t, dir, 1)
	small := genText(rand.New(rand.NewPCG(3, 3)), 100000)
	es := putFrom(t, s, "small", srcFile(t, small), int64(len(small)), PutRequest{})
	if v, err := readFormat(dir); err != nil || v != 1 {
		t.Fatalf("after a small put: format %d (%v), want 1", v, err)
	}
	// a file announced big that shrank before the put falls back to a
	// plain record and leaves the format alone
	ef := putFrom(t, s, "shrunk", srcFile(t, small), 40<<20, PutRequest{})
	if v, err := readFormat(dir); err != nil || v != 1 || ef.Flags&index.FlagChunked != 0 {
		t.Fatalf("after a streamed put that fell back (flags %v): format %d (%v), want 1", ef.Flags, v, err)
	}
	big := bigMixed(15, bigFull+1)
	eb := putFrom(t, s, "big", srcFile(t, big), int64(len(big)), PutRequest{})
	if v, err := readFormat(dir); err != nil || v != 3 || eb.Flags&index.FlagLateTable == 0 {
		t.Fatalf("after a streamed put (flags %v): format %d (%v), want 3", eb.Flags, v, err)
	}
	if iv, _, _ := s.idx.Format(); iv != 3 {
		t.Fatalf("index format %d after a streamed put, want 3", iv)
	}
	s.Close()
	s, err := Open(dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !bytes.Equal(mustGet(t, s, es.ID()), small) || !bytes.Equal(mustGet(t, s, eb.ID()), big) {
		t.Fatal("revisions read back different bytes after a reopen")
	}
	verifyClean(t, s)
}

// openAtFormat creates a store in dir as a build of format v left it
// (FORMAT and the index's version) and opens it.
func openAtFormat(t *testing.T, dir string, v int) *Store {
	t.Helper()
	s, err := Open(dir, Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.idx.SetFormat(uint64(v)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := writeFormat(dir, v); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Config{}); err != nil {
		t.Fatalf("format %d store: %v", v, err)
	}
	return s
}

// TestPutFromRaisesFormat2: a format 2 store's chunked records (table
// first in their checksum, as format 2 builds streamed them and as a
// put of a whole big text still writes them) read beside a streamed
// one, which raises the store to 3; a format 2 build would refuse it.
func TestPutFromRaisesFormat2(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openAtFormat(t, dir, 2)
	old := bigMixed(16, bigFull+7)
	eo := mustPut(t, s, PutRequest{File: mustNewFile(t, s, "old"), Data: bytes.Clone(old)})
	if eo.Flags&index.FlagChunked == 0 || eo.Flags&index.FlagLateTable != 0 {
		t.Fatalf("whole-text put: flags %v, want chunked with its table first", eo.Flags)
	}
	if v, err := readFormat(dir); err != nil || v != 2 {
		t.Fatalf("after a table-first chunked put: format %d (%v), want 2", v, err)
	}
	big := bigMixed(17, bigFull+chunkSize+1)
	eb := putFrom(t, s, "big", srcFile(t, big), int64(len(big)), PutRequest{})
	if v, err := readFormat(dir); err != nil || v != 3 || eb.Flags&index.FlagLateTable == 0 {
		t.Fatalf("after a streamed put (flags %v): format %d (%v), want 3", eb.Flags, v, err)
	}
	s.Close()
	s, err := Open(dir, Config{CacheBytes: 1, LatestBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, want := range map[index.RevID][]byte{eo.ID(): old, eb.ID(): big} {
		if got, err := s.Get(ctx, id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%v after a reopen: %v", id, err)
		}
	}
	verifyClean(t, s)
	if _, err := parseFormat(dir, []byte(fmt.Sprintf("%s\nformat %d\n", formatMagic, FormatVersion+1))); !errors.Is(err, ErrFormat) {
		t.Fatalf("format past this build's: %v", err)
	}
}

// TestPutFromCorrupt: a flipped byte anywhere in a streamed record (its
// header, its table, its first, a middle and its last chunk, the
// checksum) fails the read with ErrCorrupt naming the file and
// revision, and Verify reports that revision; the record is checked
// whole though its table comes last in the checksum.
func TestPutFromCorrupt(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	data := bigMixed(18, bigFull+2*chunkSize+77)
	e := putFrom(t, s, "big", srcFile(t, data), int64(len(data)), PutRequest{})
	if e.Flags&index.FlagLateTable == 0 {
		t.Fatalf("streamed: flags %v, want a late table", e.Flags)
	}
	s.Close()
	seg := filepath.Join(dir, "segments", segName(e.Seg))
	table := uint64(recHeaderLen + chunkHeaderLen + chunkEntryLen*((e.Size+chunkSize-1)/chunkSize))
	name := fmt.Sprintf("revision %d of file %d", e.Rev, e.File)
	for _, at := range []uint64{5, 20, recHeaderLen + 6, table - 2, table + 1, uint64(e.Stored) / 2,
		uint64(e.Stored) - recTrailerLen - 1, uint64(e.Stored) - 3} {
		flipByte(t, seg, int64(e.Off+at), 0x10)
		s, err := Open(dir, Config{CacheBytes: 1, LatestBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, e.ID()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
			t.Errorf("byte %d of the record flipped: %v, want ErrCorrupt naming %s", at, err, name)
		}
		var reported []index.RevID
		if _, err := s.Verify(ctx, func(p Problem) { reported = append(reported, p.Rev) }); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(reported, e.ID()) {
			t.Errorf("byte %d of the record flipped: verify reported %v, not %v", at, reported, e.ID())
		}
		s.Close()
		flipByte(t, seg, int64(e.Off+at), 0x10)
	}
	s, err := Open(dir, Config{CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := mustGet(t, s, e.ID()); !bytes.Equal(got, data) {
		t.Fatal("restored record reads back different bytes")
	}
	verifyClean(t, s)
}

// readSizes is an io.ReaderAt that notes the largest read asked of it.
type readSizes struct {
	r       io.ReaderAt
	largest atomic.Int64
}

func (r *readSizes) ReadAt(b []byte, off int64) (int, error) {
	for n := r.largest.Load(); int64(len(b)) > n && !r.largest.CompareAndSwap(n, int64(len(b))); n = r.largest.Load() {
	}
	return r.r.ReadAt(b, off)
}

// TestPutFromCopyDedupsInBlocks: a big text the store holds already,
// put from a file (a copy, a save that changed nothing), is a dedup
// revision, found and compared without reading the file whole: no read
// larger than a group of chunks. (It was read into one buffer beside the revision
// rebuilt to compare it: 2x the file in memory, 2.16 GB for a 1 GiB
// copy.) As a new file's first revision, and as a revision with a
// parent.
func TestPutFromCopyDedupsInBlocks(t *testing.T) {
	data := bigMixed(12, bigFull+2*chunkSize+77)
	s, _ := openNew(t, Config{})
	orig := putFrom(t, s, "orig", srcFile(t, data), int64(len(data)), PutRequest{})
	for _, req := range []PutRequest{{}, {P1: orig.ID()}} {
		src := &readSizes{r: srcFile(t, data)}
		if !req.P1.IsNull() {
			req.File = orig.File
		}
		rebuilt := s.rebuiltBytes.Load()
		e := putFrom(t, s, "copy", src, int64(len(data)), req)
		if n := s.rebuiltBytes.Load() - rebuilt; n != 0 {
			t.Errorf("copy with parent %v: %d bytes rebuilt whole to compare, want none (the candidate is a chunked fulltext)", req.P1, n)
		}
		if e.Kind != index.KindDedup || e.Base != orig.ID() || e.P1 != req.P1 {
			t.Fatalf("copy with parent %v: kind %v base %v p1 %v, want a dedup of %v", req.P1, e.Kind, e.Base, e.P1, orig.ID())
		}
		if n := src.largest.Load(); n > readGroup*chunkSize {
			t.Errorf("copy with parent %v: a read of %d bytes, want at most a group of chunks, %d", req.P1, n, readGroup*chunkSize)
		}
		if !bytes.Equal(mustGet(t, s, e.ID()), data) {
			t.Fatal("the dedup revision reads back different bytes")
		}
	}
	verifyClean(t, s)
}

// TestSameBlocks compares a reader with a text block by block: equal,
// a byte apart at the end, longer, shorter, a whole number of blocks.
func TestSameBlocks(t *testing.T) {
	text := bigMixed(13, 3<<20)
	other := bytes.Clone(text)
	other[len(other)-1] ^= 1
	for _, c := range []struct {
		name string
		src  []byte
		text []byte
		want bool
	}{
		{"equal", text, text, true},
		{"last byte", other, text, false},
		{"longer", append(bytes.Clone(text), 0), text, false},
		{"shorter", text[:len(text)-1], text, false},
		{"one block and a byte", text[:1<<20+1], text[:1<<20+1], true},
		{"empty", nil, nil, true},
	} {
		got, err := sameBlocks(bytes.NewReader(c.src), c.text)
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// TestSameAsChunked compares a chunked fulltext with readers group by
// group: the same bytes, a byte changed in the last group, one byte more,
// one fewer.
func TestSameAsChunked(t *testing.T) {
	ctx := context.Background()
	data := bigMixed(14, bigFull+5*chunkSize+99)
	s, _ := openNew(t, Config{})
	e := putFrom(t, s, "big", srcFile(t, data), int64(len(data)), PutRequest{})
	if e.Flags&index.FlagChunked == 0 {
		t.Fatalf("not chunked: %v", e.Flags)
	}
	other := bytes.Clone(data)
	other[len(other)-2] ^= 0x40
	for _, c := range []struct {
		name string
		src  []byte
		want bool
	}{
		{"same", data, true},
		{"a byte in the last group", other, false},
		{"longer", append(bytes.Clone(data), 'x'), false},
		{"shorter", data[:len(data)-1], false},
	} {
		got, err := s.sameAs(ctx, e.ID(), e, bytes.NewReader(c.src))
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}
