package mount

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

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
	st  *objstore.Store
	log *slog.Logger
	// ids maps live identities to store ones. The sink's goroutine (or
	// a snapshot, holding lockedSink's lock) reads it freely and writes
	// it with idsMu held; anyone else reads it with idsMu read-locked
	// (storeID), so that .history never waits for a recording.
	idsMu sync.RWMutex
	ids   map[fs.FileID]index.FileID
	last  map[index.FileID]index.RevID // newest revision of each file
	// known holds the size of a file's newest revision when that
	// revision was recorded from a report of this mount, so that the
	// next report's ranges describe the change from it exactly.
	known map[index.FileID]int64
	// restoring holds the revision a file's next change restores (a
	// restore writing through the mount): the second parent of the
	// revision that records it.
	restoring map[index.FileID]index.RevID
	f         *os.File // idsFile, for appending
	// liveRead counts the bytes read from live files to record them:
	// what recording costs (tests and benchmarks read it).
	liveRead atomic.Int64
}

// openStoreSink loads the id map of the store in dir.
func openStoreSink(st *objstore.Store, path string, log *slog.Logger) (*storeSink, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &storeSink{st: st, log: log, f: f, ids: map[fs.FileID]index.FileID{}, last: map[index.FileID]index.RevID{}, known: map[index.FileID]int64{}, restoring: map[index.FileID]index.RevID{}}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	parseIDs(b, s.ids)
	return s, nil
}

// storeID returns the store identity of the live file id, if it has one.
func (s *storeSink) storeID(id fs.FileID) (index.FileID, bool) {
	s.idsMu.RLock()
	defer s.idsMu.RUnlock()
	fid, ok := s.ids[id]
	return fid, ok && !id.IsZero()
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

// change stores the live content of c as the next revision of its file:
// from the written ranges alone when they describe the change from the
// previous revision, else from the whole live file.
func (s *storeSink) change(ctx context.Context, c *fs.Change, continues fs.FileID) error {
	if c.Content == nil {
		return fmt.Errorf("%s: live file not reopened; change not recorded", c.Path)
	}
	if c.Size > maxRecordBytes {
		return fmt.Errorf("%s: %d bytes, more than the %d a revision may have; change not recorded", c.Path, c.Size, int64(maxRecordBytes))
	}
	fid, err := s.fileFor(c, continues)
	if err != nil {
		return err
	}
	restored, restoring := s.restoring[fid]
	delete(s.restoring, fid)
	// A restore is a fulltext put, so that the store may dedup or delta
	// it against the revision it brings back.
	if !restoring {
		if ok, err := s.fromWrites(ctx, fid, c); ok || err != nil {
			return err
		}
	}
	data, err := readContent(c.Content, c.Size)
	if err != nil {
		return fmt.Errorf("%s: read live file: %w", c.Path, err)
	}
	s.liveRead.Add(int64(len(data)))
	req := objstore.PutRequest{File: fid, Data: data, P1: s.prev(fid)}
	if restoring {
		req.P2, req.Hints = restored, []index.RevID{restored}
	}
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

// fromWrites records c from its written ranges alone (a delta-only put:
// reading, hashing and storing only the bytes written), when the previous
// revision is exactly the content the ranges start from. It reports
// whether it recorded c; false with a nil error means "record the whole
// file": the store wants a fulltext (ErrNeedFulltext: its chain cap, at most
// once per MaxChainLen revisions), or the live file changed under the
// report (a later report describes that change).
func (s *storeSink) fromWrites(ctx context.Context, fid index.FileID, c *fs.Change) (bool, error) {
	baseLen, ok := s.known[fid]
	p1 := s.prev(fid)
	if !ok || c.New || c.Whole || len(c.Sources) > 0 || p1.IsNull() || c.Kept > baseLen {
		return false, nil
	}
	spans := make([]delta.Span, len(c.Dirty))
	for i, r := range c.Dirty {
		spans[i] = delta.Span{Off: r.Off, Len: r.Len}
	}
	d, err := delta.EncodeWrites(baseLen, c.Kept, c.Size, spans, countingReader{c.Content, &s.liveRead})
	if err != nil {
		s.log.Debug("no delta from the written ranges", "file", fid, "err", err)
		return false, nil
	}
	e, err := s.st.Put(ctx, objstore.PutRequest{File: fid, P1: p1, Delta: d, DeltaBase: p1, DeltaOnly: true, Size: uint64(c.Size)})
	if err != nil {
		s.log.Debug("written ranges not stored alone; recording the whole file", "file", fid, "err", err)
		return false, nil
	}
	s.last[fid] = e.ID()
	s.known[fid] = c.Size
	return true, nil
}

// countingReader counts the bytes read from the live file.
type countingReader struct {
	r io.ReaderAt
	n *atomic.Int64
}

func (c countingReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.n.Add(int64(n))
	return n, err
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
	s.idsMu.Lock()
	s.ids[id] = fid
	s.idsMu.Unlock()
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
