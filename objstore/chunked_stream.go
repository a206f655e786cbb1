package objstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/s2"
	"golang.org/x/sys/unix"
)

// A streamed chunked fulltext is the record of chunked.go, written
// while its text is read instead of after: one goroutine reads the
// source a chunk at a time and hashes it in order, encoders take read
// chunks from the newest backwards and S2-encode them, and the appender
// (the caller) writes each chunk's stored bytes at its place in the
// segment, in order, mostly with direct I/O (direct_write.go: a page
// cache write cost ~0.85 s of CPU per GB here, a direct one ~0.1 s).
// When the appender reaches a chunk no encoder is done with, it takes it
// itself and stores it raw, without waiting for an encoding under way
// (which is then dropped): on a machine whose cores are the bottleneck
// (M1: 1 GiB, ~2.5 s of S2 on 2 shared cores, against ~0.6 s to write
// it raw with two direct writes in flight) the two meet where encoding
// stops paying for itself, and on one with cores to spare the encoders
// stay ahead and more chunks are encoded. A chunk stored raw to save
// time (not because it does not compress) is counted in
// streamOut.fast: the put marks the revision index.FlagFastZstd, so
// that a repack compresses it again. Zeros are never stored raw: the
// reader finds a file's holes without reading them, and the appender
// encodes a chunk of mostly zeros itself (chunked_holes.go).
//
// The header (payload length) and the chunk table (each chunk's stored
// length) are known only at the end; their space is reserved at the
// record's start and written last. The record is one whose table comes
// last in its checksum (recFlagLateTable, format 3): the appender sums
// each chunk's stored bytes as it writes them, and the header and table
// are summed after. (A checksum that summed them first was summed over
// the chunks read back from the segment after the stream: 0.14-0.35 s
// of M1's wall, after the stream, where nothing else could run.) The
// stream's buffers are recycled (fresh ones cost a page fault per 4 KiB:
// 0.5 s of M1's 2.5 s of CPU): it holds a window of chunks, whatever
// the file's size.

// streamWindow bounds how many chunks the reader may hold ahead of the
// appender (per encoder; plus one): the encoders' choice, and the memory
// of chunks read but not yet written.
const streamWindow = 8

// streamOut is what streamChunked wrote.
type streamOut struct {
	hash  uint64         // xxhash64 of the text
	sum   *xxhash.Digest // of the chunks' stored bytes, in order
	table []byte         // the payload's table (its first bytes)
	n     int64          // payload length, table included
	fast  int            // chunks stored raw to save time
	holes int            // chunks found holes, not read (chunked_holes.go)
}

// errStreamSize: the source's length is not the size it was streamed
// as (it changed under the put): the caller reads it whole instead.
var errStreamSize = errors.New("source length changed while streamed")

// streamer holds the state the reader, encoders and appender share.
type streamer struct {
	src    io.ReaderAt
	size   int64
	jobs   []chunkJob
	window int
	mu     sync.Mutex
	cond   *sync.Cond
	nread  int    // chunks read
	front  int    // next chunk the appender writes
	state  []byte // per chunk: stFree, stEncoding, stEncoded, stRaw
	// shared: per chunk, the appender took it raw while an encoder was
	// encoding it; whichever of the two is done with its text last
	// recycles it (it clears shared when done first).
	shared  []bool
	err     error // the first error; stops everyone
	readEnd bool  // the reader is done (err, or all read and checked)
	hash    uint64
	// texts and outs hold buffers of chunks' texts and S2 encodings done
	// with, to be read and encoded into again: fresh ones cost a page
	// fault every 4 KiB.
	texts, outs [][]byte
	// mapped is the source mapped whole (mmap.go), if it could be: its
	// chunks are read in place, not copied, and never recycled.
	mapped []byte
	stored []int // per chunk, the length written
	// finder finds the source's holes (nil: not a file); holes counts
	// the chunks found holes; zeros are their shared text and encodings
	// (chunked_holes.go).
	finder *holeFinder
	holes  int
	zeros  zeroChunks
	// encCost is how long an encoder took for a chunk, pace how long the
	// appender takes per chunk (moving averages): an encoder starts only
	// a chunk the appender will not reach before it is encoded.
	encCost, pace time.Duration
	lastDone      time.Time
}

const (
	stFree = iota
	stEncoding
	stEncoded
	stRaw
)

// streamChunked reads size bytes of src (exactly: a source of another
// length fails with errStreamSize) and writes them as a chunked payload
// into f at off (payload offset 0), leaving the table's space for the
// caller. ctx is checked between chunks. workers encoders run (0: the
// default).
func streamChunked(ctx context.Context, src io.ReaderAt, size int64, f *os.File, off int64, workers int) (streamOut, error) {
	n := int((size + chunkSize - 1) / chunkSize)
	if workers == 0 {
		// One core is the appender's: raw is its share (see above).
		workers = max(min(runtime.GOMAXPROCS(0)-1, maxChunkWorkers, n), 1)
	}
	workers = max(workers, 0)
	st := &streamer{src: src, size: size, jobs: make([]chunkJob, n), state: make([]byte, n),
		stored: make([]int, n), shared: make([]bool, n), window: streamWindow*max(workers, 1) + 1}
	st.cond = sync.NewCond(&st.mu)
	st.finder = newHoleFinder(src)
	defer st.finder.close()
	if m := mapSource(src, size); m != nil {
		st.mapped = m
		defer unix.Munmap(m)
	}
	var wg sync.WaitGroup
	wg.Go(func() { st.guarded(func() { st.read(ctx) }) })
	for range workers {
		wg.Go(func() { st.guarded(st.encode) })
	}
	out, err := st.appendMapped(f, off+chunkHeaderLen+chunkEntryLen*int64(n))
	wg.Wait()
	if err == nil {
		err = st.err
	}
	if err != nil {
		return streamOut{}, err
	}
	out.hash, out.holes = st.hash, st.holes
	out.table = chunkTable(st.jobs, st.stored)
	out.n += int64(len(out.table))
	return out, nil
}

// take pops a buffer of free, or returns nil. Called with mu held.
func take(free *[][]byte) []byte {
	k := len(*free)
	if k == 0 {
		return nil
	}
	b := (*free)[k-1]
	*free = (*free)[:k-1]
	return b
}

// fail records err as the stream's error, if it is the first.
func (st *streamer) fail(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	st.cond.Broadcast()
	st.mu.Unlock()
}

// read reads the chunks in order, at most window ahead of the appender,
// and sums the text's hash.
func (st *streamer) read(ctx context.Context) {
	defer func() {
		st.mu.Lock()
		st.readEnd = true
		st.cond.Broadcast()
		st.mu.Unlock()
	}()
	d := xxhash.New()
	for i := range st.jobs {
		st.mu.Lock()
		for st.err == nil && i-st.front >= st.window {
			st.cond.Wait()
		}
		stop := st.err != nil
		buf := take(&st.texts)
		st.mu.Unlock()
		if stop {
			return
		}
		if err := ctx.Err(); err != nil {
			st.fail(err)
			return
		}
		off := int64(i) * chunkSize
		n := min(chunkSize, st.size-off)
		if st.finder.hole(off, n) {
			st.readHole(i, int(n), d, buf)
			continue
		}
		switch {
		case st.mapped != nil:
			buf = st.mapped[off : off+n : off+n]
		case int64(cap(buf)) >= n:
			buf = buf[:n]
		default:
			buf = make([]byte, n)
		}
		if st.mapped == nil {
			if m, err := st.src.ReadAt(buf, off); m < len(buf) {
				if err == nil || errors.Is(err, io.EOF) {
					err = errStreamSize
				}
				st.fail(fmt.Errorf("read at %d: %w", off, err))
				return
			}
		}
		d.Write(buf) // a mapped chunk faults in here (or, cut short, panics: catchFault)
		if fr, ok := st.src.(FileReader); ok && st.mapped != nil {
			fr.Mapped(n)
		}
		st.mu.Lock()
		st.jobs[i].text = buf
		st.nread++
		st.cond.Broadcast()
		st.mu.Unlock()
	}
	var one [1]byte
	// A mapped source or one with holes not read may have shrunk unseen.
	if m, _ := st.src.ReadAt(one[:], st.size); m > 0 || (st.mapped != nil || st.holes > 0) && !sizeIs(sourceFile(st.src), st.size) {
		st.fail(errStreamSize)
		return
	}
	st.mu.Lock()
	st.hash = d.Sum64()
	st.mu.Unlock()
}

// encode S2-encodes free chunks, the newest read first, until none is
// left to take.
func (st *streamer) encode() {
	for {
		st.mu.Lock()
		i := -1
		for st.err == nil {
			if i = st.newestFree(); i >= 0 || st.front+countTaken(st.state[st.front:]) == len(st.jobs) {
				break
			}
			st.cond.Wait()
		}
		if i < 0 {
			st.mu.Unlock()
			return
		}
		st.state[i] = stEncoding
		j := &st.jobs[i]
		text, buf := j.text, take(&st.outs)
		st.mu.Unlock()
		if buf == nil {
			buf = make([]byte, s2.MaxEncodedLen(chunkSize))
		}
		t0 := time.Now()
		out, codec := s2.Encode(buf, text), byte(chunkS2)
		if len(out) >= len(text) { // incompressible: stored raw, not to save time
			out, codec = text, chunkRaw
		}
		st.mu.Lock()
		st.encCost = average(st.encCost, time.Since(t0))
		st.encoded(i, out, codec, buf)
		st.cond.Broadcast()
		st.mu.Unlock()
	}
}

// encoded records chunk i's encoding (out, in buf), unless the appender
// took the chunk raw meanwhile: then the encoding is dropped. Called
// with mu held.
func (st *streamer) encoded(i int, out []byte, codec byte, buf []byte) {
	j := &st.jobs[i]
	if st.state[i] != stEncoding { // taken raw
		st.outs = append(st.outs, buf)
		if st.shared[i] {
			st.shared[i] = false // the appender recycles the text
		} else {
			st.recycle(j.text)
			j.text = nil
		}
		return
	}
	j.out, j.codec = out, codec
	if codec == chunkS2 {
		st.recycle(j.text)
		j.text = nil
	} else {
		st.outs = append(st.outs, buf)
	}
	st.state[i] = stEncoded
}

// newestFree returns the newest read chunk no one has taken, or -1; or
// -1 too if the appender would reach it before it is encoded: on a
// loaded machine (an encoding takes longer than the appender's way to
// it) the encoders wait instead of taking CPU from the reader for
// encodings the appender drops. Called with mu held.
func (st *streamer) newestFree() int {
	for i := st.nread - 1; i >= st.front; i-- {
		if st.state[i] == stFree {
			if time.Duration(i-st.front)*st.pace*4 < st.encCost*5 {
				return -1
			}
			return i
		}
	}
	return -1
}

// average folds d into the moving average avg (0: none yet).
func average(avg, d time.Duration) time.Duration {
	if avg == 0 {
		return d
	}
	return (3*avg + d) / 4
}

// countTaken counts the leading chunks of states that someone took.
func countTaken(states []byte) int {
	for i, s := range states {
		if s == stFree {
			return i
		}
	}
	return len(states)
}

// appendAll writes the chunks in order from at, taking raw any chunk no
// encoder took, and returns the payload's length without its table.
func (st *streamer) appendAll(f *os.File, at int64) (streamOut, error) {
	out := streamOut{sum: xxhash.New()}
	start := at
	w := newDirectWriter(f, at)
	defer w.close()
	for i := range st.jobs {
		st.mu.Lock()
		for st.err == nil && i >= st.nread {
			st.cond.Wait()
		}
		if st.err != nil {
			st.mu.Unlock()
			return streamOut{}, st.err
		}
		j := &st.jobs[i]
		// A chunk no encoder is done with is written raw: waiting for
		// one would hold the disk up for the rest of its encoding. An
		// encoder leaves a chunk taken raw alone (its j.out included).
		raw := st.state[i] == stFree || st.state[i] == stEncoding
		if raw {
			st.shared[i] = st.state[i] == stEncoding
			st.state[i] = stRaw
			j.out, j.codec = j.text, chunkRaw
		}
		st.front = i + 1
		st.cond.Broadcast()
		st.mu.Unlock()
		// But not zeros (chunked_holes.go).
		if raw && !st.squeeze(j) {
			out.fast++
		}
		if err := w.write(j.out); err != nil {
			st.fail(err)
			return streamOut{}, fmt.Errorf("write chunk %d: %w", i, err)
		}
		out.sum.Write(j.out)
		at += int64(len(j.out))
		st.done(i)
	}
	if err := w.finish(); err != nil {
		st.fail(err)
		return streamOut{}, fmt.Errorf("write chunks: %w", err)
	}
	st.mu.Lock()
	for !st.readEnd {
		st.cond.Wait()
	}
	err := st.err
	st.mu.Unlock()
	out.n = at - start
	return out, err
}

// done recycles the buffers of chunk i, written.
func (st *streamer) done(i int) {
	j := &st.jobs[i]
	now := time.Now()
	st.mu.Lock()
	if !st.lastDone.IsZero() {
		st.pace = average(st.pace, now.Sub(st.lastDone))
	}
	st.lastDone = now
	st.stored[i] = len(j.out)
	switch {
	case j.codec == chunkS2 && !st.sharedZero(j.out):
		st.outs = append(st.outs, j.out[:cap(j.out)])
	case st.shared[i]:
		st.shared[i] = false // its encoder recycles the text
	default:
		st.recycle(j.text)
		j.text = nil
	}
	j.out = nil
	st.mu.Unlock()
}

// chunkTable returns the table of a chunked payload of jobs, whose
// chunks are stored bytes long.
func chunkTable(jobs []chunkJob, stored []int) []byte {
	p := make([]byte, 0, chunkHeaderLen+chunkEntryLen*len(jobs))
	p = binary.BigEndian.AppendUint32(p, chunkSize)
	p = binary.BigEndian.AppendUint32(p, uint32(len(jobs)))
	for i := range jobs {
		p = append(p, jobs[i].codec)
		p = binary.BigEndian.AppendUint32(p, uint32(stored[i]))
	}
	return p
}
