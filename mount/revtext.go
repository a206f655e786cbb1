package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/spill"
	"github.com/deltafs/deltafs/objstore"
)

// Text is the content of a revision as Cat returns it: Size bytes,
// written out by WriteTo (once); Close releases it.
type Text interface {
	io.WriterTo
	Size() int64
	Close() error
}

// CatBytes is c.Cat with the text read into memory (tests).
func CatBytes(ctx context.Context, c Controller, t Target, spec RevSpec) (FileRev, []byte, error) {
	r, text, err := c.Cat(ctx, t, spec)
	if err != nil {
		return r, nil, err
	}
	defer text.Close()
	if rt, ok := text.(*revText); ok && rt.f == nil {
		return r, rt.data, nil
	}
	w := &appendWriter{b: make([]byte, 0, min(text.Size(), maxData))}
	if _, err := text.WriteTo(w); err != nil {
		return r, nil, err
	}
	return r, w.b, nil
}

// appendWriter appends what it is given to b. Made with b's capacity the
// text's size, it never grows it: a bytes.Buffer, which io.Copy reads
// into through ReadFrom, asks for room past its end before each read,
// and doubled the buffer of a text that filled it exactly.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// textSpillMin is the size from which cat and restore have the store
// write a revision into an unlinked file of the store's directory
// instead of reading it into memory (as the mount's views do theirs:
// spill.Text). An offline restore of a 128 MiB revision peaked at
// 584 MB of RSS with the text, its sparse write and the put's compare
// each holding it; a cat through a mount held it in the mount and in
// the command, and sent it through the control socket as one buffer.
const textSpillMin = 32 << 20

// revText is a revision's text: in an unlinked file (f) or in memory.
// It is also the io.ReaderAt restore writes and records from.
type revText struct {
	f    *os.File
	data []byte
	size int64
	gen  uint64 // the store's TakeBacks before the text was read (objstore.Store.PutSameNoWait)
}

// text returns the text of revision id, of size bytes (its entry's):
// spilled to a file where the store can write it there a group of
// chunks at a time (objstore.Store.WriteText: a chunked fulltext, a
// delta on one) and it is textSpillMin bytes or more, else in memory.
func (h *historian) text(ctx context.Context, id index.RevID, size uint64) (*revText, error) {
	t, err := readText(ctx, h.st, id, size)
	return t, wrapCorrupt(err)
}

// readText is historian.text for any user of st (textHash too); the
// file is in st's directory.
func readText(ctx context.Context, st *objstore.Store, id index.RevID, size uint64) (*revText, error) {
	gen := st.TakeBacks()
	if size >= textSpillMin {
		f, err := spill.Text(ctx, st.Dir(), size, func(ctx context.Context, w io.WriterAt) (bool, error) {
			return st.WriteText(ctx, id, w)
		})
		if err != nil {
			return nil, err
		}
		if f != nil {
			return &revText{f: f, size: int64(size), gen: gen}, nil
		}
	}
	data, err := st.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &revText{data: data, size: int64(len(data)), gen: gen}, nil
}

func (t *revText) Size() int64 { return t.size }

func (t *revText) ReadAt(p []byte, off int64) (int, error) {
	if t.f != nil {
		return t.f.ReadAt(p, off)
	}
	if off >= int64(len(t.data)) {
		return 0, io.EOF
	}
	n := copy(p, t.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (t *revText) WriteTo(w io.Writer) (int64, error) {
	if t.f == nil {
		n, err := w.Write(t.data)
		return int64(n), err
	}
	return io.Copy(w, io.NewSectionReader(t.f, 0, t.size))
}

func (t *revText) Close() error {
	t.data = nil
	if t.f == nil {
		return nil
	}
	return t.f.Close()
}

// connText is the text of a cat's answer on the control socket: size
// bytes after the answer's newline, read from the connection as they
// are written out (never whole in the command's memory).
type connText struct {
	conn io.Closer
	r    io.Reader // the decoder's buffered bytes, then the connection
	size int64
	dir  string
}

func (t *connText) Size() int64 { return t.size }

func (t *connText) WriteTo(w io.Writer) (int64, error) {
	var nl [1]byte
	if _, err := io.ReadFull(t.r, nl[:]); err != nil {
		return 0, fmt.Errorf("control socket of %s: %w", t.dir, err)
	}
	if nl[0] != '\n' {
		return 0, fmt.Errorf("control socket of %s: no newline after the answer", t.dir)
	}
	sr := &socketReader{r: io.LimitReader(t.r, t.size), dir: t.dir}
	n, err := io.Copy(w, sr)
	if err == nil && n < t.size {
		err = fmt.Errorf("control socket of %s: %w (%d of %d bytes)", t.dir, io.ErrUnexpectedEOF, n, t.size)
		sr.failed = true
	}
	if sr.failed {
		// Not the writer's failure: the mount's.
		err = fmt.Errorf("%w: the mount stopped sending the revision (an unmount ends an answer not read within %s of its start; a read error is in the mount's log)", err, closeWriteGrace)
	}
	return n, err
}

func (t *connText) Close() error { return t.conn.Close() }

// socketReader names the control socket in its read errors, which an
// io.Copy returns beside the writer's.
type socketReader struct {
	r      io.Reader
	dir    string
	failed bool // a read failed (set by Read)
}

func (s *socketReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("control socket of %s: %w", s.dir, err)
		s.failed = true
	}
	return n, err
}

// restore is what a restore through the mount tells the store sink of
// the change it makes (storeSink.restoring): the revision it brings back
// and that revision's text.
type restore struct {
	rev  index.RevID
	text *revText
}

// restoreOf returns the restore of revision rev, whose text the restore
// writes from text. The sink gets a copy of text's fields: the restore
// closes text when it returns, which may be while the sink still
// compares the live file with it (a restore whose wait was cut short);
// a closed file then fails the compare, and the copy's bytes stay.
func restoreOf(rev index.RevID, text *revText) restore {
	c := *text
	return restore{rev, &c}
}

// sameText reports whether a's first size bytes are text, compared a
// MiB at a time; a read error, or a short read (a file cut meanwhile),
// is no match.
func sameText(a io.ReaderAt, text *revText, size int64) bool {
	if text.Size() != size {
		return false
	}
	const block = 1 << 20
	ba, bt := make([]byte, min(size, block)), make([]byte, min(size, block))
	for off := int64(0); off < size; off += block {
		n := min(size-off, block)
		if m, err := a.ReadAt(ba[:n], off); int64(m) != n || err != nil && !errors.Is(err, io.EOF) {
			return false
		}
		if m, err := text.ReadAt(bt[:n], off); int64(m) != n || err != nil && !errors.Is(err, io.EOF) {
			return false
		}
		if !bytes.Equal(ba[:n], bt[:n]) {
			return false
		}
	}
	return true
}
