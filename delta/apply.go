package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Codec identifies how a delta's body is encoded. It is the delta's first byte.
type Codec byte

const (
	// CodecCopy is the copy/insert instruction stream described in the package doc.
	CodecCopy Codec = 1
	// CodecZstd is a zstd frame compressed with the base as a raw dictionary.
	CodecZstd Codec = 2
)

func (c Codec) String() string {
	switch c {
	case CodecCopy:
		return "copy"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", byte(c))
}

// ErrCorrupt matches (errors.Is) every error caused by malformed delta bytes.
var ErrCorrupt = errors.New("corrupt delta")

// ErrBaseMismatch matches an error from applying a delta to a base of another
// length than the one it was made against. It also matches ErrCorrupt.
var ErrBaseMismatch = fmt.Errorf("%w: base length mismatch", ErrCorrupt)

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Header parses a delta's header: its codec and the lengths of the base it
// applies to and of the target it produces.
func Header(d []byte) (c Codec, baseLen, targetLen uint64, err error) {
	_, c, baseLen, targetLen, err = parseHeader(d)
	return c, baseLen, targetLen, err
}

func parseHeader(d []byte) (body []byte, c Codec, baseLen, targetLen uint64, err error) {
	if len(d) == 0 {
		return nil, 0, 0, 0, corrupt("empty")
	}
	c = Codec(d[0])
	if c != CodecCopy && c != CodecZstd {
		return nil, 0, 0, 0, corrupt("unknown codec %d", d[0])
	}
	body = d[1:]
	var n int
	if baseLen, n = binary.Uvarint(body); n <= 0 {
		return nil, 0, 0, 0, corrupt("bad base length")
	}
	body = body[n:]
	if targetLen, n = binary.Uvarint(body); n <= 0 {
		return nil, 0, 0, 0, corrupt("bad target length")
	}
	if baseLen > math.MaxInt || targetLen > math.MaxInt {
		return nil, 0, 0, 0, corrupt("length out of range")
	}
	return body[n:], c, baseLen, targetLen, nil
}

// Apply returns the target that delta d produces from base.
func Apply(base, d []byte) ([]byte, error) {
	return AppendApply(nil, base, d)
}

// AppendApply appends the target that delta d produces from base to dst and
// returns the extended slice. On error dst's contents are unchanged.
func AppendApply(dst, base, d []byte) ([]byte, error) {
	body, c, baseLen, targetLen, err := parseHeader(d)
	if err != nil {
		return dst, err
	}
	if baseLen != uint64(len(base)) {
		return dst, fmt.Errorf("%w: delta wants %d bytes, got %d", ErrBaseMismatch, baseLen, len(base))
	}
	if c == CodecZstd {
		return appendZstd(dst, base, body, int(targetLen))
	}
	if err := walk(body, uint64(len(base)), targetLen, nil); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = grow(dst, int(targetLen))
	out := dst[start:]
	_ = walk(body, uint64(len(base)), targetLen, func(in instr) error {
		switch in.op {
		case opInsert:
			copy(out, in.lit)
		case opCopy:
			copy(out, base[in.off:in.off+in.n])
		case opRun:
			fill(out[:in.n], in.b)
		}
		out = out[in.n:]
		return nil
	})
	return dst, nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n)
	copy(nb, b)
	return nb
}

// Instruction opcodes: the low two bits of an instruction's leading varint.
const (
	opInsert = 0
	opCopy   = 1
	opRun    = 2
)

// instr is one decoded CodecCopy instruction.
type instr struct {
	op  int
	n   int
	lit []byte // opInsert: the literal bytes
	off int    // opCopy: base offset
	b   byte   // opRun: the repeated byte
}

// walk validates a CodecCopy body and, if emit is not nil, calls it for each
// instruction. It checks every bound before emit sees it.
func walk(body []byte, baseLen, targetLen uint64, emit func(in instr) error) error {
	var produced, end uint64
	for len(body) > 0 {
		h, k := binary.Uvarint(body)
		if k <= 0 {
			return corrupt("bad instruction at target offset %d", produced)
		}
		body = body[k:]
		n := h >> 2
		if n == 0 || n > targetLen-produced {
			return corrupt("instruction of %d bytes at target offset %d overflows target of %d", n, produced, targetLen)
		}
		in := instr{op: int(h & 3), n: int(n)}
		switch in.op {
		case opInsert:
			if n > uint64(len(body)) {
				return corrupt("insert of %d bytes past end of delta", n)
			}
			in.lit, body = body[:n], body[n:]
		case opCopy:
			d, k := binary.Varint(body)
			if k <= 0 {
				return corrupt("bad copy offset at target offset %d", produced)
			}
			body = body[k:]
			off := end + uint64(d) // wraps for out-of-range offsets; caught below
			if off > baseLen || n > baseLen-off {
				return corrupt("copy of %d bytes at base offset %d outside base of %d", n, int64(end)+d, baseLen)
			}
			in.off, end = int(off), off+n
		case opRun:
			if len(body) == 0 {
				return corrupt("run without its byte at target offset %d", produced)
			}
			in.b, body = body[0], body[1:]
		default:
			return corrupt("unknown instruction %d at target offset %d", h&3, produced)
		}
		if emit != nil {
			if err := emit(in); err != nil {
				return err
			}
		}
		produced += n
	}
	if produced != targetLen {
		return corrupt("produces %d bytes, header says %d", produced, targetLen)
	}
	return nil
}

// ApplyStream writes the target that delta d produces from base, of baseLen
// bytes, to w, reading base in bounded chunks. It serves targets too large to
// hold in memory. A CodecZstd delta needs its whole base in memory and is
// refused for bases over 2 GiB, which EncodeZstd never produces.
func ApplyStream(w io.Writer, base io.ReaderAt, baseLen int64, d []byte) error {
	body, c, bl, targetLen, err := parseHeader(d)
	if err != nil {
		return err
	}
	if bl != uint64(baseLen) {
		return fmt.Errorf("%w: delta wants %d bytes, got %d", ErrBaseMismatch, bl, baseLen)
	}
	if c == CodecZstd {
		if baseLen > maxZstdBase {
			return corrupt("zstd delta against a base of %d bytes", baseLen)
		}
		b := make([]byte, baseLen)
		if err := readFull(base, b, 0); err != nil {
			return err
		}
		out, err := appendZstd(nil, b, body, int(targetLen))
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	if err := walk(body, bl, targetLen, nil); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	return walk(body, bl, targetLen, func(in instr) error {
		switch in.op {
		case opInsert:
			_, err := w.Write(in.lit)
			return err
		case opRun:
			return writeRun(w, buf, in.b, in.n)
		}
		off, n := in.off, in.n
		for n > 0 {
			chunk := buf[:min(n, len(buf))]
			if err := readFull(base, chunk, int64(off)); err != nil {
				return err
			}
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			off += len(chunk)
			n -= len(chunk)
		}
		return nil
	})
}

// readFull fills b from r at off; a short read is an error.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read base at %d: %w", off, err)
}

func fill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for i := 1; i < len(b); i *= 2 {
		copy(b[i:], b[:i])
	}
}

// writeRun writes n copies of v to w, using buf as scratch.
func writeRun(w io.Writer, buf []byte, v byte, n int) error {
	fill(buf[:min(n, len(buf))], v)
	for n > 0 {
		k := min(n, len(buf))
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
