package mount

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// The rows of "deltafs log" cross the control socket in a compact binary
// form rather than inside the JSON answer: a file of 10,000 revisions is
// about 1.8 MB of JSON, which the mount took ~30 ms to encode (and grew
// its heap by as much again) and the CLI ~80 ms to decode; as rows it is
// about a fifth of that, read with no reflection. The answer's JSON
// carries the log's path and file with no revisions and DataBytes; the
// rows follow it like cat's content. A client asks for this form
// (Request.Rows); a mount that does not know it answers in JSON, which
// the client still reads.
//
// Layout: a version byte (rowsVersion), the row count (4 bytes, big
// endian), then the rows, each of uvarints unless said:
//
//	rev, time (ns since the epoch, zigzag varint, delta from the previous
//	row), size, chain, stored, base (string), refs present (a byte: bit 0
//	base_rev, 1 p1, 2 p2, 3 base2_rev, set only for a p1+p2 revision,
//	which a store older builds refuse holds) then file and rev of each
//	present, flag count
//	and flags (strings), snapshot count and names (strings)
//
// where a string is a uvarint length and its bytes. The mount encodes
// the rows as it reads the file's index rows (historian.logRows): no
// list of 10,000 revisions is built on its side.

// rowsVersion is the first byte of the rows.
const rowsVersion = 1

// maxRowString bounds a string in a row: snapshot names are short.
const maxRowString = 4096

// rowWriter encodes rows.
type rowWriter struct {
	b    []byte
	at   int    // where the count goes
	n    uint32 // rows so far
	prev int64  // time of the previous row
}

func newRowWriter(b []byte) *rowWriter {
	return &rowWriter{b: append(b, rowsVersion, 0, 0, 0, 0), at: len(b) + 1}
}

// bytes returns the rows with their count.
func (w *rowWriter) bytes() []byte {
	binary.BigEndian.PutUint32(w.b[w.at:], w.n)
	return w.b
}

// head counts a row and appends its fixed fields (add and addRev write
// the same head from different types), returning the buffer.
func (w *rowWriter) head(rev uint64, t int64, size, chain, stored uint64, base string) []byte {
	w.n++
	b := binary.AppendUvarint(w.b, rev)
	b = binary.AppendVarint(b, t-w.prev)
	w.prev = t
	b = binary.AppendUvarint(b, size)
	b = binary.AppendUvarint(b, chain)
	b = binary.AppendUvarint(b, stored)
	return appendString(b, base)
}

// add appends r.
func (w *rowWriter) add(r RevInfo) {
	b := w.head(uint64(r.Rev), r.Time.UnixNano(), r.Size, uint64(r.Chain), uint64(r.Stored), r.Base)
	refs := [4]*RevRef{r.BaseRev, r.P1, r.P2, r.Base2Rev}
	var present byte
	for i, ref := range refs {
		if ref != nil {
			present |= 1 << i
		}
	}
	b = append(b, present)
	for _, ref := range refs {
		if ref != nil {
			b = binary.AppendUvarint(binary.AppendUvarint(b, ref.File), uint64(ref.Rev))
		}
	}
	b = appendStrings(b, r.Flags)
	w.b = appendStrings(b, r.Snapshots)
}

// addRev appends r, held by the snapshots list[p.snap] of pairs: add's
// row without building a RevInfo (no allocation).
func (w *rowWriter) addRev(r objstore.Revision, pairs []heldPair, list []index.Snapshot) {
	b := w.head(uint64(r.Rev), r.Time.UnixNano(), r.Size, uint64(r.ChainLen), uint64(r.Stored), kindName(r))
	refs := [4]index.RevID{r.Base, r.P1, r.P2, r.Base2}
	var present byte
	for i, ref := range refs {
		if !ref.IsNull() {
			present |= 1 << i
		}
	}
	b = append(b, present)
	for _, ref := range refs {
		if !ref.IsNull() {
			b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(ref.File)), uint64(ref.Rev))
		}
	}
	nf := 0
	for _, fn := range flagNames {
		if r.Flags&fn.f != 0 {
			nf++
		}
	}
	b = binary.AppendUvarint(b, uint64(nf))
	for _, fn := range flagNames {
		if r.Flags&fn.f != 0 {
			b = appendString(b, fn.name)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(pairs)))
	for _, p := range pairs {
		b = appendString(b, list[p.snap].Name)
	}
	w.b = b
}

// appendRows encodes revs.
func appendRows(b []byte, revs []RevInfo) []byte {
	w := newRowWriter(b)
	for _, r := range revs {
		w.add(r)
	}
	return w.bytes()
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendStrings(b []byte, l []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = appendString(b, s)
	}
	return b
}

// errRows is a malformed row stream.
var errRows = errors.New("control socket: malformed log rows")

// rowReader decodes appendRows' output; the first error sticks.
type rowReader struct {
	b   []byte
	err error
}

func (d *rowReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errRows
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *rowReader) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errRows
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *rowReader) uint32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.err = errRows
	}
	return uint32(v)
}

func (d *rowReader) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errRows
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *rowReader) string() string {
	n := d.uvarint()
	if d.err != nil || n > maxRowString || n > uint64(len(d.b)) {
		d.err = errRows
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// strings reads a list; none gives nil, as in the JSON (omitempty).
func (d *rowReader) strings() []string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) { // each string takes a byte at least
		d.err = errRows
		return nil
	}
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = d.string()
	}
	return l
}

// readRows decodes the rows b holds, which must be all of it; no rows
// give an empty list (the JSON says []).
func readRows(b []byte) ([]RevInfo, error) {
	if len(b) < 5 || b[0] != rowsVersion {
		return nil, fmt.Errorf("%w: no version %d header", errRows, rowsVersion)
	}
	n := binary.BigEndian.Uint32(b[1:])
	d := &rowReader{b: b[5:]}
	if uint64(n) > uint64(len(d.b)) { // a row takes several bytes
		return nil, fmt.Errorf("%w: %d rows in %d bytes", errRows, n, len(d.b))
	}
	revs := make([]RevInfo, 0, n)
	var t int64
	for i := range n {
		var r RevInfo
		r.Rev = d.uint32()
		t += d.varint()
		r.Time = time.Unix(0, t).UTC()
		r.Size = d.uvarint()
		r.Chain, r.Stored = d.uint32(), d.uint32()
		r.Base = d.string()
		present := d.byte()
		if present > 15 {
			d.err = errRows
		}
		for j, ref := range []**RevRef{&r.BaseRev, &r.P1, &r.P2, &r.Base2Rev} {
			if present&(1<<j) != 0 {
				*ref = &RevRef{File: d.uvarint(), Rev: d.uint32()}
			}
		}
		r.Flags, r.Snapshots = d.strings(), d.strings()
		if d.err != nil {
			return nil, fmt.Errorf("row %d: %w", i, d.err)
		}
		revs = append(revs, r)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last row", errRows, len(d.b))
	}
	return revs, nil
}
