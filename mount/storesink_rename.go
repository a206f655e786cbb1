package mount

import (
	"context"
	"fmt"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// saveWindow: a file whose history began less than this before it was
// renamed over a file with a history is taken for the temp file of an
// atomic save that took its time (written, closed and renamed more than
// the recorder's newFileGrace apart: "cp f f.new; edit f.new; mv f.new
// f", a program that reopens its temp file to fsync it), and continues
// the replaced file's history as a quick save does. An older file renamed
// over another keeps its own history ("mv a b" carries a's to b), and the
// replaced one is a deleted file's.
const saveWindow = 5 * time.Minute

// renamedOver applies the rename of live file r.ID over r.Replaced to
// the id map: a file with no history yet, or a young one (saveWindow),
// continues the replaced file's history (transfer); a young one's newest
// content becomes that history's next revision, with its own newest
// revision as second parent (a dedup of it: no data is stored again).
func (s *storeSink) renamedOver(ctx context.Context, r *fs.Rename) error {
	fid, ok := s.ids[r.Replaced]
	if !ok {
		return nil
	}
	own, hasOwn := s.ids[r.ID]
	if hasOwn && (own == fid || !s.youngerThan(own, s.saveWindow)) {
		return nil
	}
	if err := s.transfer(r.ID, r.Replaced, fid); err != nil {
		return err
	}
	// Durable now: the replaced file's identity leaves the live tree, and
	// its history would look like a deleted file's.
	if err := s.syncIDs(); err != nil {
		return err
	}
	if !hasOwn {
		return nil
	}
	return s.carryOver(ctx, fid, own, r.To)
}

// youngerThan reports whether store file fid's first revision is less
// than d old.
func (s *storeSink) youngerThan(fid index.FileID, d time.Duration) bool {
	e, err := s.st.Entry(index.RevID{File: fid, Rev: 0})
	return err == nil && time.Since(time.Unix(0, e.Time)) < d
}

// carryOver records the newest revision of store file from as the next
// revision of fid, the history its live file now continues.
func (s *storeSink) carryOver(ctx context.Context, fid, from index.FileID, path string) error {
	src := s.prev(from)
	if src.IsNull() {
		return nil
	}
	e, err := s.st.Entry(src)
	if err != nil {
		return fmt.Errorf("%s: continue the replaced file's history: %w", path, err)
	}
	data, err := s.st.Get(ctx, src)
	if err != nil {
		return fmt.Errorf("%s: continue the replaced file's history: %w", path, err)
	}
	ne, err := s.st.Put(ctx, objstore.PutRequest{File: fid, Data: data, P1: s.prev(fid), P2: src,
		Hints: []index.RevID{src}, Time: time.Unix(0, e.Time)})
	if err != nil {
		return fmt.Errorf("%s: continue the replaced file's history: %w", path, err)
	}
	s.last[fid] = ne.ID()
	if n, ok := s.known[from]; ok {
		s.known[fid] = n
	} else {
		delete(s.known, fid)
	}
	return nil
}
