package mount

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// idsFile maps live-tree FileIDs to store FileIDs: a log of 24-byte
// records (16-byte fs.FileID, 8-byte big-endian index.FileID), appended
// when a file gets its store identity, read whole at mount. It is not
// fsynced: after a crash a file may start a new store identity (its
// history splits in two), but no revision is lost.
const idsFile = "live.ids"

const idRecordLen = 24

// maxRecordBytes caps the files recorded: the store takes a revision as
// one fulltext in memory, so a larger file (a VM image, a sparse file of
// many GiB) stays in the live tree, unrecorded, with one log line.
const maxRecordBytes = 4 << 30

// storeSink records changes as revisions in an objstore.Store.
type storeSink struct {
	st   *objstore.Store
	log  *slog.Logger
	ids  map[fs.FileID]index.FileID
	last map[index.FileID]index.RevID // newest revision of each file
	// known holds the size of a file's newest revision when that
	// revision was recorded from a report of this mount, so that the
	// next report's ranges describe the change from it exactly.
	known map[index.FileID]int64
	f     *os.File // idsFile, for appending
}

// openStoreSink loads the id map of the store in dir.
func openStoreSink(st *objstore.Store, path string, log *slog.Logger) (*storeSink, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &storeSink{st: st, log: log, f: f, ids: map[fs.FileID]index.FileID{}, last: map[index.FileID]index.RevID{}, known: map[index.FileID]int64{}}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	for ; len(b) >= idRecordLen; b = b[idRecordLen:] {
		var id fs.FileID
		copy(id[:], b)
		s.ids[id] = index.FileID(binary.BigEndian.Uint64(b[16:]))
	}
	return s, nil
}

// Close closes the id map.
func (s *storeSink) Close() error { return s.f.Close() }

// Record implements Sink.
func (s *storeSink) Record(ctx context.Context, ev Event) error {
	switch {
	case ev.Change != nil:
		defer ev.Change.Close()
		return s.change(ctx, ev.Change, ev.Continues)
	case ev.Rename != nil && !ev.Rename.Replaced.IsZero() && !ev.Rename.ID.IsZero() && !ev.Rename.Exchange:
		// A file with no history yet (never recorded) that replaces
		// another carries on the replaced file's history; a file with
		// its own history keeps it ("mv a b" carries a's history to b).
		_, own := s.ids[ev.Rename.ID]
		if fid, ok := s.ids[ev.Rename.Replaced]; ok && !own {
			return s.bind(ev.Rename.ID, fid)
		}
	}
	return nil
}

// change stores the live content of c as the next revision of its file.
func (s *storeSink) change(ctx context.Context, c *fs.Change, continues fs.FileID) error {
	if c.Content == nil {
		return fmt.Errorf("%s: live file not reopened; change not recorded", c.Path)
	}
	if c.Size > maxRecordBytes {
		return fmt.Errorf("%s: %d bytes, more than the %d a revision may have; change not recorded", c.Path, c.Size, int64(maxRecordBytes))
	}
	data, err := readContent(c.Content, c.Size)
	if err != nil {
		return fmt.Errorf("%s: read live file: %w", c.Path, err)
	}
	fid, err := s.fileFor(c, continues)
	if err != nil {
		return err
	}
	req := objstore.PutRequest{File: fid, Data: data, P1: s.prev(fid)}
	s.carryWrites(&req, c)
	for _, src := range c.Sources {
		if sf, ok := s.ids[src.ID]; ok && sf != fid {
			req.Hints = append(req.Hints, s.prev(sf))
			if req.P2.IsNull() {
				req.P2 = s.prev(sf)
			}
		}
	}
	e, err := s.st.Put(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: record revision: %w", c.Path, err)
	}
	s.last[fid] = e.ID()
	s.known[fid] = int64(len(data))
	return nil
}

// carryWrites gives req the delta from its first parent built from the
// written ranges alone (reading only those bytes), when the parent is
// exactly the content the ranges start from. The store verifies it and
// keeps it if no delta of its own is smaller.
func (s *storeSink) carryWrites(req *objstore.PutRequest, c *fs.Change) {
	baseLen, ok := s.known[req.File]
	if !ok || c.New || c.Whole || req.P1.IsNull() || c.Kept > baseLen {
		return
	}
	spans := make([]delta.Span, len(c.Dirty))
	for i, r := range c.Dirty {
		spans[i] = delta.Span{Off: r.Off, Len: r.Len}
	}
	d, err := delta.EncodeWrites(baseLen, c.Kept, int64(len(req.Data)), spans, bytes.NewReader(req.Data))
	if err != nil {
		s.log.Debug("no delta from the written ranges", "file", req.File, "err", err)
		return
	}
	req.Delta, req.DeltaBase = d, req.P1
}

// fileFor returns the store identity of c's file, making one if needed.
func (s *storeSink) fileFor(c *fs.Change, continues fs.FileID) (index.FileID, error) {
	if fid, ok := s.ids[continues]; ok && !continues.IsZero() {
		return fid, s.bind(c.ID, fid)
	}
	if fid, ok := s.ids[c.ID]; ok && !c.ID.IsZero() {
		return fid, nil
	}
	fid, err := s.st.NewFile(c.Path)
	if err != nil {
		return 0, fmt.Errorf("%s: new store file: %w", c.Path, err)
	}
	if c.ID.IsZero() {
		return fid, nil
	}
	return fid, s.bind(c.ID, fid)
}

// bind maps id to fid, in memory and in the ids file.
func (s *storeSink) bind(id fs.FileID, fid index.FileID) error {
	if s.ids[id] == fid {
		return nil
	}
	s.ids[id] = fid
	var rec [idRecordLen]byte
	copy(rec[:], id[:])
	binary.BigEndian.PutUint64(rec[16:], uint64(fid))
	if _, err := s.f.Write(rec[:]); err != nil {
		return fmt.Errorf("append %s: %w", idsFile, err)
	}
	return nil
}

// prev returns the newest revision of fid, or the null RevID.
func (s *storeSink) prev(fid index.FileID) index.RevID {
	if r, ok := s.last[fid]; ok {
		return r
	}
	m, err := s.st.File(fid)
	if err != nil || m.Revs == 0 {
		if err != nil && !errors.Is(err, objstore.ErrNotFound) {
			s.log.Warn("file record unreadable; recording without a parent", "file", fid, "err", err)
		}
		return index.RevID{}
	}
	r := index.RevID{File: fid, Rev: index.Rev(m.Revs - 1)}
	s.last[fid] = r
	return r
}

// readContent reads the live file from its start.
func readContent(f *os.File, size int64) ([]byte, error) {
	buf := make([]byte, 0, max(size, 0)+1)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf[len(buf):cap(buf)], off)
		buf, off = buf[:len(buf)+n], off+int64(n)
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}
