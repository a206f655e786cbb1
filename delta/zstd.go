package delta

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/klauspost/compress/zstd"
)

// maxZstdBase bounds the base of a CodecZstd delta: zstd can only refer back
// as far as its window, and its largest window is 512 MiB.
const maxZstdBase = zstd.MaxWindowSize

// maxZstdRatio bounds how many output bytes one byte of a zstd frame can
// produce: a raw-literal RLE block turns 4 bytes into up to 128 KiB.
const maxZstdRatio = 32 << 10

// zstdDictID is the dictionary ID written into every CodecZstd frame.
const zstdDictID = 1

// ErrTooLarge is returned by EncodeZstd when base and target do not fit in
// one zstd window together; use Encode instead.
var ErrTooLarge = errors.New("delta: inputs too large for the zstd codec")

// EncodeZstd returns a CodecZstd delta: target compressed by zstd at the given
// level with the whole of base as a raw dictionary. Level is a
// zstd.EncoderLevel (1 fastest to 4 best). Unlike Encode, its cost follows the
// size of both inputs: zstd indexes the whole dictionary.
func EncodeZstd(base, target []byte, level int) ([]byte, error) {
	if len(base)+len(target) > zstd.MaxWindowSize {
		return nil, ErrTooLarge
	}
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderDictRaw(zstdDictID, base),
		zstd.WithWindowSize(windowFor(len(base)+len(target))),
		zstd.WithEncoderLevel(zstd.EncoderLevel(level)),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false), // the store checksums every record
	)
	if err != nil {
		return nil, fmt.Errorf("delta: zstd encoder: %w", err)
	}
	defer enc.Close()
	out := appendHeader(make([]byte, 0, 64), CodecZstd, uint64(len(base)), uint64(len(target)))
	return enc.EncodeAll(target, out), nil
}

// windowFor returns the smallest zstd window (a power of two) that covers n bytes.
func windowFor(n int) int {
	w := max(zstd.MinWindowSize, 1<<bits.Len(uint(max(n, 1)-1)))
	return min(w, zstd.MaxWindowSize)
}

func appendZstd(dst, base, body []byte, targetLen int) ([]byte, error) {
	if len(base) > maxZstdBase {
		return dst, corrupt("zstd delta against a base of %d bytes", len(base))
	}
	// zstd expands at most maxZstdRatio-fold (an RLE block: 4 bytes in,
	// 128 KiB out), so a header claiming more than that is a lie, and must
	// not make the decoder reserve memory for it.
	if targetLen/maxZstdRatio > len(body)+1 {
		return dst, corrupt("zstd body of %d bytes cannot produce %d", len(body), targetLen)
	}
	window := windowFor(len(base) + targetLen)
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderDictRaw(zstdDictID, base),
		zstd.WithDecoderMaxWindow(uint64(window)),
		zstd.WithDecoderMaxMemory(uint64(max(targetLen, window))),
		zstd.WithDecoderConcurrency(1),
	)
	if err != nil {
		return dst, fmt.Errorf("delta: zstd decoder: %w", err)
	}
	defer dec.Close()
	start := len(dst)
	out, err := dec.DecodeAll(body, dst)
	if err != nil {
		return dst[:start], corrupt("zstd: %v", err)
	}
	if len(out)-start != targetLen {
		return dst[:start], corrupt("zstd body produced %d bytes, header says %d", len(out)-start, targetLen)
	}
	return out, nil
}
