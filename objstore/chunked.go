package objstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// A chunked fulltext (record flag recFlagChunked, format 2) is a large
// text cut into chunks of chunkSize bytes (the last one shorter), each
// encoded on its own, so that a put encodes them on every core and a
// read decodes each straight into its place in the text:
//
//	off   size  field
//	0     4     chunk size (bytes of text per chunk, the last one shorter)
//	4     4     chunk count n = ceil(text length / chunk size)
//	8     5n    per chunk: codec (1 byte), stored length (4 bytes)
//	8+5n  ...   the chunks' stored bytes, in order
//
// Codecs: chunkRaw (the text itself: incompressible data costs a copy),
// chunkS2 (klauspost's S2 block format) and chunkZstd (one zstd frame).
// Puts write S2: on this project's 2-core machine it compresses text at
// ~400 MB/s of CPU per core against ~200 MB/s for zstd's fastest level
// and ~100 MB/s for the fastest level's streaming encoder that big
// fulltexts used before (M1: ~10 s of CPU for 1 GiB), for a ratio of
// 2.4 against 3.5 on text (2.1 against 2.9 on an executable). A big file
// is rarely rewritten wholesale, so its few fulltexts weigh little in a
// store; repack stores them again with each chunk a zstd frame
// (compressBigWith). Every fulltext of bigFull bytes or more is chunked,
// even one that does not compress (its chunks raw), so that it can be
// read a group of chunks at a time (walkChunked).
const (
	chunkRaw  = 0
	chunkS2   = 1
	chunkZstd = 2

	chunkSize       = 4 << 20
	chunkHeaderLen  = 8
	chunkEntryLen   = 5
	minChunkSize    = 4 << 10 // bounds the table a header may claim
	maxChunkWorkers = 4
)

// chunkJob is one chunk's text and what it was encoded to.
type chunkJob struct {
	text  []byte
	codec byte
	out   []byte
}

// encodeChunked encodes data as a chunked payload of S2 chunks; it
// reports false when that is not smaller than data.
func encodeChunked(data []byte) ([]byte, bool) { return encodeChunks(data, chunkSize, nil) }

// encodeChunks is encodeChunked with chunks of size bytes (minChunkSize
// or more): the format lets a reader take any such size, and tests and
// fuzzing build many-chunk records from small texts with it. With enc,
// each chunk is a zstd frame of enc instead of S2 (repack). A chunk
// that does not compress is stored raw; the payload is made even when
// it is not smaller than data (by at most 8 bytes and 5 per chunk).
func encodeChunks(data []byte, size int, enc *zstd.Encoder) ([]byte, bool) {
	jobs := make([]chunkJob, (len(data)+size-1)/size)
	for i := range jobs {
		jobs[i].text = data[i*size : min((i+1)*size, len(data))]
	}
	eachChunk(len(jobs), func(i int) {
		j := &jobs[i]
		if enc != nil {
			j.out, j.codec = enc.EncodeAll(j.text, make([]byte, 0, len(j.text)/2)), chunkZstd
		} else {
			j.out, j.codec = s2.Encode(make([]byte, s2.MaxEncodedLen(len(j.text))), j.text), chunkS2
		}
		if len(j.out) >= len(j.text) { // incompressible: S2 finds that at GB/s
			j.out, j.codec = j.text, chunkRaw
		}
	})
	n := chunkHeaderLen + chunkEntryLen*len(jobs)
	for i := range jobs {
		n += len(jobs[i].out)
	}
	p := make([]byte, 0, n)
	p = binary.BigEndian.AppendUint32(p, uint32(size))
	p = binary.BigEndian.AppendUint32(p, uint32(len(jobs)))
	for i := range jobs {
		p = append(p, jobs[i].codec)
		p = binary.BigEndian.AppendUint32(p, uint32(len(jobs[i].out)))
	}
	for i := range jobs {
		p = append(p, jobs[i].out...)
	}
	return p, n < len(data)
}

// eachChunk runs fn(0..n-1) on up to maxChunkWorkers goroutines.
func eachChunk(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), maxChunkWorkers, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

var errChunked = errors.New("bad chunked fulltext")

// chunkSpan is where one chunk lies in the payload and in the text;
// stored is filled in by whoever holds the payload's bytes.
type chunkSpan struct {
	codec          byte
	at, n          uint64 // stored bytes: offset in the payload, length
	stored         []byte
	textOff, textN int
}

// chunkTableLen returns the length of the table of payload p's header
// (its first chunkHeaderLen bytes), or an error if that cannot fit in
// payloadLen bytes.
func chunkTableLen(p []byte, payloadLen uint64) (uint64, error) {
	if len(p) < chunkHeaderLen || payloadLen < chunkHeaderLen {
		return 0, fmt.Errorf("%w: %d bytes", errChunked, payloadLen)
	}
	n := uint64(binary.BigEndian.Uint32(p[4:]))
	if table := chunkHeaderLen + chunkEntryLen*n; table <= payloadLen {
		return table, nil
	}
	return 0, fmt.Errorf("%w: table of %d chunks in %d bytes", errChunked, n, payloadLen)
}

// parseChunkTable checks a chunked payload's table (its first
// chunkTableLen bytes) against the payload and text lengths and returns
// where its chunks lie.
func parseChunkTable(table []byte, payloadLen, textLen uint64) ([]chunkSpan, error) {
	tl, err := chunkTableLen(table, payloadLen)
	if err != nil {
		return nil, err
	}
	if uint64(len(table)) < tl {
		return nil, fmt.Errorf("%w: table cut short", errChunked)
	}
	size := uint64(binary.BigEndian.Uint32(table))
	n := uint64(binary.BigEndian.Uint32(table[4:]))
	if size < minChunkSize || n != (textLen+size-1)/size {
		return nil, fmt.Errorf("%w: %d chunks of %d bytes for a text of %d", errChunked, n, size, textLen)
	}
	spans := make([]chunkSpan, n)
	at := tl
	for i := range spans {
		e := table[chunkHeaderLen+chunkEntryLen*uint64(i):]
		stored := uint64(binary.BigEndian.Uint32(e[1:]))
		textOff := uint64(i) * size
		c := chunkSpan{codec: e[0], at: at, n: stored, textOff: int(textOff), textN: int(min(size, textLen-textOff))}
		if c.codec > chunkZstd || stored > payloadLen-at || c.codec == chunkRaw && stored != uint64(c.textN) {
			return nil, fmt.Errorf("%w: chunk %d (codec %d, %d bytes)", errChunked, i, c.codec, stored)
		}
		spans[i], at = c, at+stored
	}
	if at != payloadLen {
		return nil, fmt.Errorf("%w: %d bytes after the last chunk", errChunked, payloadLen-at)
	}
	return spans, nil
}

// decodeSpans decodes the chunks of spans (their stored bytes at hand)
// into their places in text, on every core.
func decodeSpans(text []byte, spans []chunkSpan, dec *zstd.Decoder) error {
	errs := make([]error, len(spans))
	eachChunk(len(spans), func(i int) {
		c := spans[i]
		errs[i] = decodeChunk(text[c.textOff:c.textOff+c.textN:c.textOff+c.textN], c, dec)
		if errs[i] != nil {
			errs[i] = fmt.Errorf("chunk at +%d: %w", c.textOff, errs[i])
		}
	})
	return errors.Join(errs...)
}

// decodeChunk decodes c into out, which has exactly the chunk's length.
func decodeChunk(out []byte, c chunkSpan, dec *zstd.Decoder) error {
	switch c.codec {
	case chunkRaw:
		copy(out, c.stored)
		return nil
	case chunkS2:
		if len(out) == chunkSize && bytes.Equal(c.stored, zeroChunkS2()) {
			clear(out) // chunked_holes.go: S2 decodes zeros at ~170 MB/s
			return nil
		}
		if n, err := s2.DecodedLen(c.stored); err != nil || n != len(out) {
			return fmt.Errorf("%w: S2 chunk of %d bytes, want %d (%v)", errChunked, n, len(out), err)
		}
		got, err := s2.Decode(out, c.stored)
		if err != nil || len(got) != len(out) || &got[0] != &out[0] {
			return fmt.Errorf("%w: S2: %v", errChunked, err)
		}
		return nil
	default:
		got, err := dec.DecodeAll(c.stored, out[:0])
		if err != nil || len(got) != len(out) || len(got) > 0 && &got[0] != &out[0] {
			return fmt.Errorf("%w: zstd chunk of %d bytes, want %d (%v)", errChunked, len(got), len(out), err)
		}
		return nil
	}
}
