package mount

import (
	"context"
	"fmt"
	"io"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// historyView is the fs.History of a mount: .history's listing of one
// file. It waits until that file's queued changes are recorded (and so
// what was queued ahead of them; nothing when the file has none queued:
// the id map is read under its own lock, not behind a recording in
// progress), maps the live identity to the store's, and reads that
// file's revisions alone: no snapshot and no other file is looked at.
type historyView struct {
	st  *objstore.Store
	rec *Recorder
	ids idSource
}

var _ fs.History = (*historyView)(nil)

// idSource maps a live file's identity to its store identity.
type idSource interface {
	storeID(id fs.FileID) (index.FileID, bool)
}

// fixedIDs is the id map of a read-only mount, read once at mount.
type fixedIDs map[fs.FileID]index.FileID

func (m fixedIDs) storeID(id fs.FileID) (index.FileID, bool) {
	fid, ok := m[id]
	return fid, ok && !id.IsZero()
}

// file returns the store identity of live file id once every change of
// it closed before the call is recorded; ok is false if it has none.
func (h *historyView) file(ctx context.Context, id fs.FileID) (index.FileID, bool, error) {
	if err := h.rec.waitHistory(ctx, id); err != nil {
		return 0, false, err
	}
	fid, ok := h.ids.storeID(id)
	return fid, ok, nil
}

func (h *historyView) Revisions(ctx context.Context, id fs.FileID) ([]fs.Revision, error) {
	fid, ok, err := h.file(ctx, id)
	if err != nil || !ok {
		return nil, err
	}
	// The index rows straight into the small fs.Revision: for 10,000
	// revisions, objstore.History's full records would be 2 MB more
	// garbage per listing.
	m, err := h.st.File(fid)
	if err != nil {
		return nil, wrapCorrupt(err)
	}
	out := make([]fs.Revision, 0, m.Revs)
	err = h.st.Revisions(ctx, fid, func(e index.Entry) error {
		out = append(out, fs.Revision{ID: e.ID(), Size: e.Size, Time: e.Time})
		return nil
	})
	return out, wrapCorrupt(err)
}

func (h *historyView) Len(ctx context.Context, id fs.FileID) (index.FileID, int, error) {
	fid, ok, err := h.file(ctx, id)
	if err != nil || !ok {
		return 0, 0, err
	}
	e, ok, err := h.st.Latest(fid) // not the record's count: gc leaves gaps
	if err != nil || !ok {
		return fid, 0, wrapCorrupt(err)
	}
	return fid, int(e.Rev) + 1, nil
}

func (h *historyView) Revision(ctx context.Context, id fs.FileID, rev index.Rev) (fs.Revision, error) {
	fid, ok, err := h.file(ctx, id)
	if err != nil {
		return fs.Revision{}, err
	}
	if !ok {
		return fs.Revision{}, fmt.Errorf("revision %d: %w", rev, index.ErrNotFound)
	}
	r, err := h.st.Revision(index.RevID{File: fid, Rev: rev})
	if err != nil {
		return fs.Revision{}, wrapCorrupt(err)
	}
	return revisionOf(fid, r), nil
}

func (h *historyView) Read(ctx context.Context, id index.RevID) ([]byte, error) {
	b, err := h.st.Get(ctx, id)
	return b, wrapCorrupt(err)
}

var _ fs.TextWriter = (*historyView)(nil)

// WriteText implements fs.TextWriter.
func (h *historyView) WriteText(ctx context.Context, id index.RevID, w io.WriterAt) (bool, error) {
	ok, err := h.st.WriteText(ctx, id, w)
	return ok, wrapCorrupt(err)
}

func revisionOf(f index.FileID, r objstore.Revision) fs.Revision {
	return fs.Revision{ID: r.ID(f), Size: r.Size, Time: r.Time.UnixNano()}
}

// waitHistory returns when every change of file id closed before the
// call is recorded (Flush: a change held back is released, so that
// .history shows what deltafs log shows), and the renames that may give
// it another file's history: a file renamed over another with no
// history of its own carries on the replaced file's (see storeSink).
func (r *Recorder) waitHistory(ctx context.Context, id fs.FileID) error {
	if err := r.Flush(ctx, id); err != nil {
		return err
	}
	r.mu.Lock()
	target := r.bound[id]
	r.mu.Unlock()
	return r.waitFor(ctx, target)
}

// historyView returns the .history of a mount of store: over the sink's
// id map, or over the ids file as it was at mount on a read-only mount
// (which records nothing).
func (m *running) historyView(store string) (*historyView, error) {
	h := &historyView{st: m.st, rec: m.rec}
	if m.sink != nil {
		h.ids = m.sink
		return h, nil
	}
	ids, err := readIDs(store)
	h.ids = fixedIDs(ids)
	return h, err
}
