package delta

import (
	"fmt"
	"io"
)

// ApplyInPlace applies delta d to the base held in buf, writing the target
// over the base in buf itself, when it can do so without reading a byte it
// has already overwritten: every copy must read from at or after the
// offset it writes to (in-place edits, truncations and deletions do; an
// insertion followed by copies of what comes after it does not), the
// target must fit in buf's capacity, and d must be a CodecCopy delta. It
// returns the target (buf's array, resliced) and true; or buf untouched
// and false when d is not such a delta. A malformed delta is an error and
// leaves buf untouched.
//
// It lets a reader of a revision a few bytes from a big base hold one
// text instead of the base and the target both.
func ApplyInPlace(buf, d []byte) ([]byte, bool, error) {
	body, baseLen, targetLen, ok, err := inPlaceBody(d)
	if err == nil && baseLen != uint64(len(buf)) {
		err = fmt.Errorf("%w: delta wants %d bytes, got %d", ErrBaseMismatch, baseLen, len(buf))
	}
	if err != nil || !ok || targetLen > uint64(cap(buf)) {
		return buf, false, err
	}
	out := buf[:targetLen]
	p := 0
	_ = walk(body, baseLen, targetLen, func(in instr) error {
		switch in.op {
		case opInsert:
			copy(out[p:], in.lit)
		case opCopy:
			if in.off != p {
				copy(out[p:p+in.n], buf[in.off:in.off+in.n]) // memmove: overlap is fine
			}
		case opRun:
			fill(out[p:p+in.n], in.b)
		}
		p += in.n
		return nil
	})
	return out, true, nil
}

// ReadWriterAt is what ApplyInPlaceAt applies a delta in: a file.
type ReadWriterAt interface {
	io.ReaderAt
	io.WriterAt
}

// ApplyInPlaceAt is ApplyInPlace over a base held in f, from its start,
// of baseLen bytes: under the same condition (a CodecCopy delta whose
// every copy reads from at or after the offset it writes to) it writes
// the target over the base in f and returns its length and true. A copy
// in place, as EncodeWrites makes for the bytes a write left alone,
// costs nothing: only the inserted and run bytes are written, and the
// bytes a copy moves, a block at a time. Bytes of f past the target's
// length are left as they were: the caller cuts f. It returns false,
// having written nothing, for any other delta; a malformed delta is an
// error before anything is written, and an error of f's may leave f
// with part of the target.
//
// It lets a big revision a few edits from its fulltext be rebuilt in a
// file, in memory of the order of the edits, not of the text.
func ApplyInPlaceAt(f ReadWriterAt, baseLen int64, d []byte) (int64, bool, error) {
	body, bl, targetLen, ok, err := inPlaceBody(d)
	if err == nil && (baseLen < 0 || bl != uint64(baseLen)) {
		err = fmt.Errorf("%w: delta wants %d bytes, got %d", ErrBaseMismatch, bl, baseLen)
	}
	if err != nil || !ok {
		return 0, false, err
	}
	var buf []byte
	block := func(n int) []byte {
		if buf == nil {
			buf = make([]byte, 1<<20)
		}
		return buf[:min(n, len(buf))]
	}
	var p int64
	err = walk(body, bl, targetLen, func(in instr) error {
		defer func() { p += int64(in.n) }()
		switch in.op {
		case opInsert:
			_, err := f.WriteAt(in.lit, p)
			return err
		case opRun:
			fill(block(in.n), in.b)
			for done := 0; done < in.n; {
				b := block(in.n - done)
				if _, err := f.WriteAt(b, p+int64(done)); err != nil {
					return err
				}
				done += len(b)
			}
		case opCopy:
			// Forward, a block at a time: a block written ends before the
			// next one read begins (in.off >= p).
			for done := 0; in.off != int(p) && done < in.n; {
				b := block(in.n - done)
				if err := readFull(f, b, int64(in.off+done)); err != nil {
					return err
				}
				if _, err := f.WriteAt(b, p+int64(done)); err != nil {
					return err
				}
				done += len(b)
			}
		}
		return nil
	})
	if err != nil {
		return 0, true, err
	}
	return int64(targetLen), true, nil
}

// InPlace reports whether d can be applied in place (ApplyInPlace,
// ApplyInPlaceAt, given room for its target): a CodecCopy delta whose
// every copy reads from at or after the offset it writes to. It returns
// the lengths d's header gives. A malformed header, or a malformed body
// of a CodecCopy delta, is an error.
func InPlace(d []byte) (baseLen, targetLen uint64, ok bool, err error) {
	_, baseLen, targetLen, ok, err = inPlaceBody(d)
	return baseLen, targetLen, ok, err
}

// inPlaceBody is InPlace, also returning d's body when ok.
func inPlaceBody(d []byte) (body []byte, baseLen, targetLen uint64, ok bool, err error) {
	body, c, baseLen, targetLen, err := parseHeader(d)
	if err != nil || c != CodecCopy {
		return nil, baseLen, targetLen, false, err
	}
	if !forward(body, baseLen, targetLen) {
		return nil, baseLen, targetLen, false, walk(body, baseLen, targetLen, nil) // the error, if malformed
	}
	return body, baseLen, targetLen, true, nil
}

// forward reports whether CodecCopy body is well formed and reads every
// copied byte from at or after where it writes it.
func forward(body []byte, baseLen, targetLen uint64) bool {
	var produced uint64
	ok := true
	err := walk(body, baseLen, targetLen, func(in instr) error {
		if in.op == opCopy && uint64(in.off) < produced {
			ok = false
		}
		produced += uint64(in.n)
		return nil
	})
	return err == nil && ok
}
