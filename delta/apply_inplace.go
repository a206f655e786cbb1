package delta

import "fmt"

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
	body, c, baseLen, targetLen, err := parseHeader(d)
	if err != nil {
		return buf, false, err
	}
	if baseLen != uint64(len(buf)) {
		return buf, false, fmt.Errorf("%w: delta wants %d bytes, got %d", ErrBaseMismatch, baseLen, len(buf))
	}
	if c != CodecCopy || targetLen > uint64(cap(buf)) {
		return buf, false, nil
	}
	var produced uint64
	forward := true
	err = walk(body, baseLen, targetLen, func(in instr) error {
		if in.op == opCopy && uint64(in.off) < produced {
			forward = false
		}
		produced += uint64(in.n)
		return nil
	})
	if err != nil || !forward {
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
