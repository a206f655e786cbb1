package delta

import (
	"encoding/binary"
)

const (
	// minCopy is the shortest match worth a copy instruction. A copy costs
	// two to six bytes and, worse, cuts a literal run that the store's
	// compressor would otherwise squeeze, and the compressor finds short
	// repeats by itself. Measured on 1 MiB of unrelated text-like data,
	// zstd-compressed: minCopy 16 gave a delta 25% larger than the
	// compressed target, 32 gave 0.3% larger, 48 the same size. Small edits
	// of large files are unaffected: their copies are long.
	minCopy = 48
	// localWindow is how far either side of the point of divergence the
	// encoder looks for the place to resume. Most edits insert, delete or
	// replace less than this, so most resynchronisations never need the
	// global index.
	localWindow = 4 << 10
	// localGiveUp is how many target bytes past a divergence the local
	// search may scan before the encoder builds the global index (once).
	localGiveUp = 2 * localWindow
)

// Encode returns a CodecCopy delta that turns base into target.
//
// It trims the common head and tail first, and indexes the rest of the base
// only if local resynchronisation after an edit fails, so its cost follows the
// size of the change rather than the size of the inputs. To encode many
// targets against one base, build an Index once instead.
func Encode(base, target []byte) []byte {
	return encode(base, target, nil)
}

// encoder holds the state of one encode.
type encoder struct {
	base, target []byte
	out          []byte

	global       *table // index over the untrimmed base; nil until needed
	globalLo     int    // region to build global over, when it is nil
	globalHi     int
	local        *table   // index of base around the last divergence
	localSlots   []uint32 // reused allocation for local
	localSpent   int      // base bytes hashed into local tables so far
	pendOff      int      // pending copy, merged with a contiguous successor
	pendLen      int
	lastCopyEnd  int // base offset after the last emitted copy
	expectedBase int // base offset aligned with the next target byte
	copyEndT     int // target offset just past the last copy
}

func encode(base, target []byte, global *table) []byte {
	e := &encoder{base: base, target: target, global: global}
	e.out = appendHeader(make([]byte, 0, 64), CodecCopy, uint64(len(base)), uint64(len(target)))

	head := matchLen(base, target)
	tail := 0
	if head < len(base) && head < len(target) {
		tail = matchLenBack(base[head:], target[head:])
	}
	e.globalLo, e.globalHi = head, len(base)-tail
	e.copy(0, head)
	e.expectedBase, e.copyEndT = head, head
	e.scan(head, len(target)-tail)
	e.copy(len(base)-tail, tail)
	e.flushCopy()
	return e.out
}

// scan encodes target[lo:hi].
func (e *encoder) scan(lo, hi int) {
	lit := lo
	t := lo
	for t+keyLen <= hi {
		b := e.find(t)
		if b < 0 {
			t++
			continue
		}
		back := matchLenBack(e.target[lit:t], e.base[:b])
		n := back + matchLen(e.target[t:hi], e.base[b:])
		if n < minCopy {
			t++
			continue
		}
		t, b = t-back, b-back
		e.insert(e.target[lit:t])
		e.copy(b, n)
		t += n
		lit = t
		e.expectedBase, e.copyEndT = b+n, t
		e.local = nil
	}
	e.insert(e.target[lit:hi])
}

// find returns a base offset that may match target at t, or -1.
func (e *encoder) find(t int) int {
	// After a replacement the old and new text line up again at the same
	// distance from the divergence; after an insertion the base resumes
	// where the last copy ended. Both are one compare away.
	if b := e.expectedBase + (t - e.copyEndT); e.cheapMatch(t, b) {
		return b
	}
	if e.cheapMatch(t, e.expectedBase) {
		return e.expectedBase
	}
	// Local tables pay off for a few scattered edits. When resyncing has
	// already hashed as much base as the global index would, or one gap has
	// outrun the window, build the global index once and use it from then on.
	if e.global == nil && (t-e.copyEndT > localGiveUp || e.localSpent > e.globalHi-e.globalLo) {
		e.global = newTable(e.base, e.globalLo, e.globalHi, nil)
	}
	if e.global != nil {
		return e.verified(t, e.global.lookup(e.target, t))
	}
	if e.local == nil {
		lo := max(0, e.expectedBase-localWindow)
		hi := min(len(e.base), e.expectedBase+localWindow)
		e.local = newTable(e.base, lo, hi, e.localSlots)
		e.localSpent += hi - lo
		e.localSlots = e.local.slots
	}
	return e.verified(t, e.local.lookup(e.target, t))
}

func (e *encoder) cheapMatch(t, b int) bool {
	return b >= 0 && b+8 <= len(e.base) && t+8 <= len(e.target) &&
		binary.LittleEndian.Uint64(e.base[b:]) == binary.LittleEndian.Uint64(e.target[t:])
}

// verified returns b if base[b:] starts with the key at target[t:], else -1.
func (e *encoder) verified(t, b int) int {
	if b < 0 || b+keyLen > len(e.base) {
		return -1
	}
	if string(e.base[b:b+keyLen]) != string(e.target[t:t+keyLen]) {
		return -1
	}
	return b
}

func (e *encoder) insert(lit []byte) {
	if len(lit) == 0 {
		return
	}
	e.flushCopy()
	e.out = binary.AppendUvarint(e.out, uint64(len(lit))<<2|opInsert)
	e.out = append(e.out, lit...)
}

func (e *encoder) copy(off, n int) {
	if n == 0 {
		return
	}
	if e.pendLen > 0 && e.pendOff+e.pendLen == off {
		e.pendLen += n
		return
	}
	e.flushCopy()
	e.pendOff, e.pendLen = off, n
}

func (e *encoder) flushCopy() {
	if e.pendLen == 0 {
		return
	}
	e.out = binary.AppendUvarint(e.out, uint64(e.pendLen)<<2|opCopy)
	e.out = binary.AppendVarint(e.out, int64(e.pendOff-e.lastCopyEnd))
	e.lastCopyEnd = e.pendOff + e.pendLen
	e.pendLen = 0
}

func appendHeader(dst []byte, c Codec, baseLen, targetLen uint64) []byte {
	dst = append(dst, byte(c))
	dst = binary.AppendUvarint(dst, baseLen)
	return binary.AppendUvarint(dst, targetLen)
}
