package objstore

import (
	"bytes"
	"runtime"

	"github.com/klauspost/compress/zstd"
)

// bigFull is the fulltext size from which compressFull trades ratio for
// speed. A fulltext this large is recorded while its writer waits (fsync,
// unmount): M1's 1 GiB new file took 40 s of CPU at the better level here
// (a loaded 2-core machine, 354 s of wall time for the unmount). The fastest
// level runs about twice as fast on text, and its streaming encoder splits
// the input across cores; large files are rarely rewritten wholesale, so
// their few fulltexts weigh little in the store's size.
const bigFull = 32 << 20

// sampleLen and sampleAt: a big fulltext is first tested on samples from
// its start, middle and end; if they do not compress to under
// incompressible of their size (media, archives, encrypted data), the text
// is stored raw without compressing the rest.
const (
	sampleLen      = 128 << 10
	incompressible = 0.97
)

// compressBig compresses a fulltext of at least bigFull bytes, or returns
// it raw if that is not smaller.
func compressBig(data []byte) ([]byte, byte) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), 4)),
		zstd.WithLowerEncoderMem(true), zstd.WithEncoderCRC(false))
	if err != nil {
		return data, 0
	}
	defer enc.Close()
	if !compressible(enc, data) {
		return data, 0
	}
	out := bytes.NewBuffer(make([]byte, 0, len(data)/2))
	enc.Reset(out)
	if _, err := enc.Write(data); err != nil {
		return data, 0
	}
	if err := enc.Close(); err != nil || out.Len() >= len(data) {
		return data, 0
	}
	return out.Bytes(), recFlagZstd
}

// compressible reports whether samples of data compress.
func compressible(enc *zstd.Encoder, data []byte) bool {
	var in, out int
	for _, at := range []int{0, len(data)/2 - sampleLen/2, len(data) - sampleLen} {
		s := data[max(at, 0):min(max(at, 0)+sampleLen, len(data))]
		in += len(s)
		out += len(enc.EncodeAll(s, nil))
	}
	return float64(out) < incompressible*float64(in)
}
