package objstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/index"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// The fuzz targets here drive the read path a revision read takes
// (readRecord, which hands chunked fulltexts to readChunked and
// readSpans) over record bytes written to a real segment file: bad bytes
// must give ErrCorrupt, never a panic, and what is accepted must be what
// the record holds.

// scratchSeg is the segment number the record reader writes its records
// to: far past any segment a test's puts reach.
const scratchSeg = 1 << 30

// recordReader reads records written to a scratch segment through the
// store's own read functions, on a Store that holds only what they use
// (segments, a decoder, buffers): no index, so no badger goroutines
// whose coverage the fuzzing engine would take for the input's.
type recordReader struct {
	s   *Store
	seg *os.File
}

// fuzzMaxText bounds the texts the record reader decodes: a resealed
// header may claim any length, and the read allocates what it claims.
const fuzzMaxText = 1 << 20

func newRecordReader(t testing.TB) *recordReader {
	dir := t.TempDir()
	// The store's decoder options, bounded for fuzzing: a few fuzzed bytes
	// can be a zstd frame that claims gigabytes (the store's bound is 16 GiB).
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(fuzzMaxText), zstd.WithDecoderLowmem(true))
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{segs: openSegments(dir, 1<<30, index.Tail{}), dec: dec}
	seg, err := os.Create(filepath.Join(dir, segName(scratchSeg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close(); s.segs.close(); dec.Close() })
	if _, err = seg.Write(bytes.Repeat([]byte{0xa5}, recordPad)); err != nil {
		t.Fatal(err)
	}
	return &recordReader{s: s, seg: seg}
}

// recordPad is where the record starts in the scratch segment, so that
// offsets within the file are exercised too.
const recordPad = 13

// entryOf is the index entry that rec's header describes, as if rec
// were at the start of the scratch segment's record.
func entryOf(rec []byte) index.Entry {
	e := index.Entry{File: 1, Kind: index.KindFull, Seg: scratchSeg, Off: recordPad, Stored: uint32(len(rec))}
	if len(rec) >= recHeaderLen {
		e.File = index.FileID(binary.BigEndian.Uint64(rec[8:]))
		e.Rev = index.Rev(binary.BigEndian.Uint32(rec[16:]))
		e.Size = binary.BigEndian.Uint64(rec[24:])
		e.Flags = index.Flags(rec[5])
		if e.Flags&index.FlagDelta != 0 {
			e.Kind, e.Base = index.KindP1, index.RevID{File: e.File}
		}
	}
	return e
}

// read writes rec to the scratch segment and reads it through
// readRecord as entry e says it is.
func (r *recordReader) read(rec []byte, e index.Entry) ([]byte, error) {
	// Whatever an earlier record left past this one is never read: a read
	// takes the entry's Stored bytes.
	if _, err := r.seg.WriteAt(rec, recordPad); err != nil {
		return nil, err
	}
	return r.s.readRecord(e.ID(), &e)
}

// reseal rewrites rec's checksum to match its bytes, so that a fuzzed
// header or payload gets past the checksum to the decoders behind it:
// summed as its header's flags say (a late table last).
func reseal(rec []byte) {
	if len(rec) < recOverhead {
		return
	}
	n := len(rec) - recTrailerLen
	if rec[5]&recFlagLateTable == 0 {
		binary.BigEndian.PutUint64(rec[n:], xxhash.Sum64(rec[:n]))
		return
	}
	_, tail := recordParts(recHeader{Flags: rec[5]}, rec[recHeaderLen:n])
	copy(rec[n:], tail)
}

// refChunked decodes a chunked payload the simple way, chunk by chunk in
// order, independently of parseChunkTable and decodeSpans: what the read
// path accepts must agree with it.
func refChunked(p []byte, textLen uint64) ([]byte, error) {
	if len(p) < chunkHeaderLen {
		return nil, errors.New("short")
	}
	size, n := binary.BigEndian.Uint32(p), uint64(binary.BigEndian.Uint32(p[4:]))
	if uint64(len(p)) < chunkHeaderLen+chunkEntryLen*n {
		return nil, errors.New("short table")
	}
	table, rest := p[chunkHeaderLen:], p[chunkHeaderLen+chunkEntryLen*n:]
	var text []byte
	for i := range n {
		codec, l := table[5*i], uint64(binary.BigEndian.Uint32(table[5*i+1:]))
		if l > uint64(len(rest)) {
			return nil, errors.New("chunk past the end")
		}
		c, err := refChunk(codec, rest[:l])
		if err != nil {
			return nil, err
		}
		if want := min(uint64(size), textLen-uint64(len(text))); uint64(len(c)) != want {
			return nil, fmt.Errorf("chunk %d: %d bytes, want %d", i, len(c), want)
		}
		text, rest = append(text, c...), rest[l:]
	}
	if len(rest) != 0 || uint64(len(text)) != textLen {
		return nil, errors.New("length")
	}
	return text, nil
}

func refChunk(codec byte, b []byte) ([]byte, error) {
	switch codec {
	case chunkRaw:
		return b, nil
	case chunkS2:
		return s2.Decode(nil, b)
	case chunkZstd:
		return refZstd(b)
	}
	return nil, fmt.Errorf("codec %d", codec)
}

func refZstd(b []byte) ([]byte, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(fuzzMaxText))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return dec.DecodeAll(b, nil)
}

// checkAccepted checks a payload readRecord accepted against the record:
// a fulltext has the entry's length, and the payload is the record's,
// decoded by the reference decoders.
func checkAccepted(t *testing.T, e index.Entry, rec, got []byte) {
	t.Helper()
	h, payload, err := decodeRecord(rec)
	if err != nil {
		t.Fatalf("readRecord accepted a record decodeRecord refuses: %v", err)
	}
	if e.Kind == index.KindFull && uint64(len(got)) != e.Size {
		t.Fatalf("fulltext of %d bytes accepted, the entry says %d", len(got), e.Size)
	}
	want := payload
	switch {
	case h.chunked():
		want, err = refChunked(payload, h.TextLen)
	case h.zstd():
		want, err = refZstd(payload)
	}
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("accepted %d bytes that the reference decoding does not give (%d bytes, %v)", len(got), len(want), err)
	}
}

// sampleRecords are records built by the real writer: plain and zstd
// fulltexts, a zstd delta, chunked fulltexts of two and three chunks (an
// S2 chunk, a run, a short raw last one). Small, for the fuzzing engine
// minimizes every input it finds interesting byte by byte.
func sampleRecords(t testing.TB) [][]byte {
	fenc, err := newEncoder(zstd.SpeedBetterCompression, fullWindow) // as Open makes them
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newEncoder(zstd.SpeedDefault, deltaWindow)
	if err != nil {
		t.Fatal(err)
	}
	id := index.RevID{File: 7, Rev: 3}
	full := func(flags byte, text, p []byte) []byte {
		return appendRecord(nil, recHeader{Flags: flags, ID: id, TextLen: uint64(len(text))}, p)
	}
	text := genText(rand.New(rand.NewPCG(21, 22)), 600)
	recs := [][]byte{full(0, text, text), full(recFlagZstd, text, fenc.EncodeAll(text, nil)),
		appendRecord(nil, recHeader{Flags: recFlagDelta | recFlagZstd, ID: id, TextLen: 99},
			enc.EncodeAll([]byte("a delta's bytes"), nil))}
	long := bytes.Repeat(text[:400], 2*minChunkSize/400+1)[:2*minChunkSize]
	noise := make([]byte, 40)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	for _, c := range [][]byte{append(long, noise...), append(long[:minChunkSize], make([]byte, minChunkSize+7)...)} {
		p, ok := encodeChunks(c, minChunkSize, nil)
		if !ok {
			t.Fatal("sample text did not compress")
		}
		// as a put of the whole text writes it, and as a stream does
		recs = append(recs, full(recFlagChunked, c, p), full(recFlagChunked|recFlagLateTable, c, p))
	}
	return recs
}

// FuzzReadRecord writes fuzzed bytes as a segment record and reads them
// through readRecord, resealed (the checksum made to match, so every
// decoder behind it is reached) or as they are.
func FuzzReadRecord(f *testing.F) {
	for _, rec := range sampleRecords(f) {
		f.Add(rec, false)
		f.Add(rec, true)
	}
	f.Add([]byte(recMagic), true)
	r := newRecordReader(f)
	f.Fuzz(func(t *testing.T, rec []byte, resealed bool) {
		if resealed {
			reseal(rec)
		}
		if len(rec) >= recHeaderLen && binary.BigEndian.Uint64(rec[24:]) > fuzzMaxText {
			return // a text the read would rightly allocate whole
		}
		// The entry the header describes: the index and the record agree,
		// and the payload's decoding is reached.
		e := entryOf(rec)
		got, err := r.read(rec, e)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		checkAccepted(t, e, rec, got)
	})
}

// FuzzChunkedRoundTrip encodes a text as the real writer does, in chunks
// of a fuzzed size, as a record whose checksum sums its table first (a
// put of the whole text) or last (a stream: size's top bit), and reads
// it back through readRecord: it gives the text exactly; with a byte of
// the record changed (x != 0) the read fails with ErrCorrupt.
func FuzzChunkedRoundTrip(f *testing.F) {
	text := genText(rand.New(rand.NewPCG(3, 4)), 2*minChunkSize+300)
	for _, late := range []uint8{0, 0x80} {
		f.Add(text, late|0, uint32(0), byte(0))
		f.Add(text, late|2, uint32(0), byte(0))
		f.Add(text, late|1, uint32(20), byte(1))
		f.Add(text, late|1, uint32(recHeaderLen+chunkHeaderLen+3), byte(0x80))
		f.Add(bytes.Repeat([]byte("ab"), 5000), late|0, uint32(5000), byte(4))
	}
	f.Add(text, uint8(0x80), uint32(5), byte(recFlagLateTable)) // the flag itself cleared
	r := newRecordReader(f)
	f.Fuzz(func(t *testing.T, text []byte, size uint8, at uint32, x byte) {
		p, ok := encodeChunks(text, minChunkSize*(1+int(size%8)), nil)
		if !ok {
			return // the writer stores such a text raw
		}
		flags := byte(recFlagChunked)
		if size&0x80 != 0 {
			flags |= recFlagLateTable
		}
		rec := appendRecord(nil, recHeader{Flags: flags, ID: index.RevID{File: 2, Rev: 5}, TextLen: uint64(len(text))}, p)
		e := entryOf(rec) // the index is right, the segment's bytes may not be
		if x != 0 {
			rec[int(at)%len(rec)] ^= x
		}
		got, err := r.read(rec, e)
		switch {
		case x == 0 && (err != nil || !bytes.Equal(got, text)):
			t.Fatalf("round trip of %d bytes in %d: %v", len(text), len(rec), err)
		case x != 0 && !errors.Is(err, ErrCorrupt):
			t.Fatalf("byte %d of %d changed: read gave %v, want ErrCorrupt", int(at)%len(rec), len(rec), err)
		}
	})
}
