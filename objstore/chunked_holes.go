package objstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/s2"
	"golang.org/x/sys/unix"
)

// Zero chunks of a streamed fulltext. A chunk that is all zeros (a
// sparse file's holes: truncate -s 1G, then a few blocks written) is
// never stored raw, whoever takes it: its stored form is the S2 encoding
// of a zero chunk, 13 bytes for 4 MiB, made once per stream and length
// and shared by every such chunk. Stored raw "to save time" a zero chunk
// cost 4 MiB (a review's 1 GiB sparse file with 12 KiB of data stored
// 653 MB, depending on how far the encoders got). The appender checks a
// chunk it takes raw for zero pages (a memcmp each, ended at its first
// non-zero byte for most data) and S2-encodes one that is half zero pages
// or more itself (squeeze); the encoders encode written zeros to the same
// few bytes anyway.
//
// Better, the reader finds the holes of a file source without reading
// them: lseek(SEEK_DATA) on a descriptor of its own (the source's offset
// stays the caller's) gives the next data at or past a chunk, and a
// chunk that lies wholly before it is a hole: not read, not mapped in
// (a mapped hole faults a page in every 4 KiB), not encoded. Its text is
// the stream's shared zero buffer, which is never recycled nor written
// into, and the text's hash sums it as it would the zeros read. A file
// system without SEEK_DATA reports all data (the generic lseek), and an
// lseek error turns the finder off: the chunks are then read. The text
// hash must still sum the zeros (xxhash has no skip): ~0.1 s of CPU per
// GiB of holes, most of what a sparse file's stream now costs. A source
// that is not an *os.File (a wrapper, such as the mount's reader that
// counts what it reads) is neither mapped nor asked for holes: its holes
// are read, and only stored compactly.
//
// The puts of a whole text (chunked.go's encodeChunked, compressBig)
// encode every chunk with S2, so their zero chunks take a few bytes too
// (they read the whole text first, holes included). A later revision of
// a sparse file is a delta whose copies span the unchanged zeros.

// zeroChunkS2 is the S2 encoding of a chunk of chunkSize zeros, as
// every writer of a chunked record stores it (s2.Encode is deterministic):
// a constant, computed once. A read recognises it and clears the chunk's
// text instead of decoding it: S2 decodes its run of zeros (copies at
// offset 1) a byte at a time, ~170 MB/s here, so that a 1 GiB sparse
// file took ~6 s of CPU to read back.
var zeroChunkS2 = sync.OnceValue(func() []byte { return s2.Encode(nil, make([]byte, chunkSize)) })

// zeroChunks holds a stream's shared zeros, made when first needed: a
// chunk's worth of text and the S2 encodings of zero chunks by length
// (a stream's chunks have at most two lengths).
type zeroChunks struct {
	text []byte
	enc  map[int][]byte
}

// zeroChunk returns n bytes of the shared zero text, which must never be
// written into nor recycled, and their shared S2 encoding. Called with
// mu held.
func (st *streamer) zeroChunk(n int) (text, enc []byte) {
	if st.zeros.text == nil {
		st.zeros = zeroChunks{text: make([]byte, chunkSize), enc: map[int][]byte{}}
	}
	e, ok := st.zeros.enc[n]
	if !ok {
		e = s2.Encode(nil, st.zeros.text[:n])
		st.zeros.enc[n] = e
	}
	return st.zeros.text[:n:n], e
}

// readHole makes chunk i, n bytes of a hole, the shared zero text, its
// encoding done, and sums it into d; buf, a text buffer the reader took
// for it, goes back.
func (st *streamer) readHole(i, n int, d *xxhash.Digest, buf []byte) {
	st.mu.Lock()
	if buf != nil {
		st.texts = append(st.texts, buf)
	}
	text, enc := st.zeroChunk(n)
	st.mu.Unlock()
	d.Write(text)
	st.mu.Lock()
	j := &st.jobs[i]
	j.text, j.out, j.codec = text, enc, chunkS2
	st.state[i] = stEncoded
	st.nread++
	st.holes++
	st.cond.Broadcast()
	st.mu.Unlock()
}

// sharedZero reports whether b is the shared zero text or one of the
// shared zero encodings: a buffer no one recycles. Called with mu held.
func (st *streamer) sharedZero(b []byte) bool {
	if len(b) == 0 || st.zeros.text == nil {
		return false
	}
	if &b[0] == &st.zeros.text[0] {
		return true
	}
	for _, e := range st.zeros.enc {
		if &b[0] == &e[0] {
			return true
		}
	}
	return false
}

// squeeze stores j, a chunk the appender took raw, compactly if it is
// mostly zeros: all zeros as the shared zero encoding, half or more of
// its pages zeros (a sparse file's chunk with a few blocks written) S2-
// encoded by the appender, which costs little on zeros. It reports
// whether it did. A chunk of data costs a byte's look per page.
func (st *streamer) squeeze(j *chunkJob) bool {
	zero, pages := zeroPages(j.text)
	switch {
	case zero == pages:
		st.mu.Lock()
		_, j.out = st.zeroChunk(len(j.text))
		st.mu.Unlock()
	case zero*2 >= pages:
		st.mu.Lock()
		buf := take(&st.outs)
		st.mu.Unlock()
		if buf == nil {
			buf = make([]byte, s2.MaxEncodedLen(chunkSize))
		}
		out := s2.Encode(buf, j.text)
		if len(out) >= len(j.text) {
			st.mu.Lock()
			st.outs = append(st.outs, buf)
			st.mu.Unlock()
			return false
		}
		j.out = out
	default:
		return false
	}
	j.codec = chunkS2
	return true
}

// zeroPages counts b's pages (of dioAlign bytes, the last one shorter)
// and those of them that are all zeros; it stops counting zero pages
// once fewer than half of them can be.
func zeroPages(b []byte) (zero, pages int) {
	pages = (len(b) + dioAlign - 1) / dioAlign
	for p := 0; p < pages; p++ {
		if allZero(b[p*dioAlign : min((p+1)*dioAlign, len(b))]) {
			zero++
		} else if (p+1-zero)*2 > pages {
			return zero, pages
		}
	}
	return zero, pages
}

// allZero reports whether b is all zeros: its first byte is, and each
// byte equals the next (one memcmp of b against itself, shifted).
func allZero(b []byte) bool {
	return len(b) > 0 && b[0] == 0 && bytes.Equal(b[1:], b[:len(b)-1])
}

// holeFinder finds the chunks of a file source that are holes.
type holeFinder struct {
	f      *os.File // the source opened again: lseek moves its own offset
	dataAt int64    // the first data at or past the last offset asked (-1: none asked)
}

// newHoleFinder returns a finder of src's holes, or nil if src is not a
// file or cannot be opened again.
func newHoleFinder(src io.ReaderAt) *holeFinder {
	f := sourceFile(src)
	if f == nil {
		return nil
	}
	g, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return nil
	}
	return &holeFinder{f: g, dataAt: -1}
}

// hole reports whether the n bytes at off are a hole (read as zeros).
// An lseek error other than ENXIO (no data past off) turns the finder
// off: every chunk is read from then on.
func (h *holeFinder) hole(off, n int64) bool {
	if h == nil || h.f == nil {
		return false
	}
	if h.dataAt < off {
		d, err := unix.Seek(int(h.f.Fd()), off, unix.SEEK_DATA)
		switch {
		case errors.Is(err, unix.ENXIO):
			d = math.MaxInt64
		case err != nil:
			h.close()
			return false
		}
		h.dataAt = d
	}
	return h.dataAt >= off+n
}

// close closes the finder's descriptor.
func (h *holeFinder) close() {
	if h != nil && h.f != nil {
		h.f.Close()
		h.f = nil
	}
}
