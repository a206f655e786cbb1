package objstore

import (
	"runtime"

	"github.com/klauspost/compress/zstd"
)

// bigFull is the fulltext size from which compressFull trades ratio for
// speed: such a text is stored chunked (chunked.go), its chunks encoded
// with S2 on every core, each one raw when it does not compress (media,
// archives, encrypted data). A fulltext this large is recorded while its
// writer may wait (fsync of a file the recorder holds no longer, a
// snapshot, unmount): M1's 1 GiB new file took 40 s of CPU at zstd's
// better level, ~10 s at its fastest (streaming, one block at a time).
const bigFull = 32 << 20

// compressBig encodes a fulltext of at least bigFull bytes, chunked even
// when it does not compress (its chunks then raw, a few bytes more than
// the text): a chunked fulltext is read a group of chunks at a time
// (Store.WriteText, the comparison of a copy, walkChunked), a raw or
// single-stream one only whole.
func compressBig(data []byte) ([]byte, byte) {
	p, _ := encodeChunked(data)
	return p, recFlagChunked
}

// compressBigWith is compressBig with each chunk a zstd frame of enc,
// for repack: a better ratio than S2, at zstd's speed.
func compressBigWith(enc *zstd.Encoder, data []byte) ([]byte, byte) {
	p, _ := encodeChunks(data, chunkSize, enc)
	return p, recFlagChunked
}

// bigDelta is the delta payload size from which a put compresses on
// every core: the delta is cut into chunks of chunkSize bytes, each one
// compressed on its own into a zstd frame at the deltas' level, and the
// frames are concatenated. A zstd stream of several frames decodes as
// their concatenation (Decoder.DecodeAll reads them all), so the record
// is an ordinary zstd payload and readers need nothing new. A delta this
// large is a writer's many scattered writes (M2: 16,384 random 4 KiB
// writes into a 256 MiB file give a 57 MiB delta of literals), recorded
// while the writer waits in fsync; one encoder took ~0.3 s of it on this
// project's loaded 2-core machine. The frames lose matches across chunk
// boundaries, little at 4 MiB.
const bigDelta = 2 * chunkSize

// compressFrames compresses a delta payload of at least bigDelta bytes as
// concatenated zstd frames, or returns it raw if that is not smaller.
func compressFrames(b []byte) ([]byte, byte) {
	n := (len(b) + chunkSize - 1) / chunkSize
	workers := min(runtime.GOMAXPROCS(0), maxChunkWorkers, n)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(workers), zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderCRC(false), zstd.WithWindowSize(chunkSize))
	if err != nil {
		return b, 0
	}
	defer enc.Close()
	frames := make([][]byte, n)
	eachChunk(n, func(i int) {
		chunk := b[i*chunkSize : min((i+1)*chunkSize, len(b))]
		frames[i] = enc.EncodeAll(chunk, make([]byte, 0, len(chunk)/2))
	})
	total := 0
	for _, f := range frames {
		total += len(f)
	}
	if total >= len(b) {
		return b, 0
	}
	out := make([]byte, 0, total)
	for _, f := range frames {
		out = append(out, f...)
	}
	return out, recFlagZstd
}
