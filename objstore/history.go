package objstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/deltafs/deltafs/index"
)

// History of one file, for "deltafs log", "cat" and "restore" and the
// mount's .history directory. A file's revisions are one prefix scan of
// its own r/<file> rows, so listing them costs what that file has,
// whatever else the store holds. Which snapshots hold a revision is
// answered from the snapshots' reference sets (index.RefKey: Rev<<32 |
// File), one probe per snapshot, never by walking a tree.
//
// A snapshot names at most one revision of a store file: it is built from
// the live tree, where a store file is one live inode (hard links share
// it). So the revision a snapshot holds is found by probing the one
// revision that was newest when the snapshot was taken, and only when
// that misses (the file was absent then, or a revision committed during
// the snapshot's build) by intersecting with all of the file's revisions.

// Revision is one revision of a file as history views show it.
type Revision struct {
	Rev        index.Rev
	Time       time.Time      // when it was stored
	Size       uint64         // fulltext length
	Kind       index.BaseKind // how it is stored
	Base       index.RevID    // delta base or dedup target; null for a fulltext
	ChainLen   uint32         // deltas applied to rebuild it (0: fulltext)
	ChainBytes uint64         // stored bytes read to rebuild it
	Stored     uint32         // length of its own record (0 for dedup)
	P1, P2     index.RevID    // parents; null when absent
	Flags      index.Flags
}

// ID returns the revision's RevID in file f.
func (r Revision) ID(f index.FileID) index.RevID { return index.RevID{File: f, Rev: r.Rev} }

func revisionOf(e index.Entry) Revision {
	return Revision{
		Rev: e.Rev, Time: time.Unix(0, e.Time).UTC(), Size: e.Size, Kind: e.Kind, Base: e.Base,
		ChainLen: e.ChainLen, ChainBytes: e.ChainBytes, Stored: e.Stored, P1: e.P1, P2: e.P2, Flags: e.Flags,
	}
}

// History returns every committed revision of file f, oldest first. A
// file that was never allocated gives an error matching ErrNotFound; one
// allocated but never written gives no revisions.
func (s *Store) History(ctx context.Context, f index.FileID) ([]Revision, error) {
	m, err := s.idx.File(f)
	if err != nil {
		return nil, fmt.Errorf("objstore: history of file %d: %w", f, err)
	}
	out := make([]Revision, 0, m.Revs)
	err = s.idx.Revisions(ctx, f, func(e index.Entry) error {
		out = append(out, revisionOf(e))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: history of file %d: %w", f, err)
	}
	return out, nil
}

// Revision returns the record of one revision; a missing one gives an
// error matching ErrNotFound.
func (s *Store) Revision(id index.RevID) (Revision, error) {
	e, err := s.entry(id)
	if err != nil {
		return Revision{}, fmt.Errorf("objstore: revision %d of file %d: %w", id.Rev, id.File, err)
	}
	return revisionOf(e), nil
}

// Holding returns, for every revision of hist (file f's History, oldest
// first), the snapshots that hold it, in creation order: out[i] belongs
// to hist[i]. It reads each snapshot's reference set once.
func (s *Store) Holding(ctx context.Context, f index.FileID, hist []Revision) ([][]index.Snapshot, error) {
	out := make([][]index.Snapshot, len(hist))
	if len(hist) == 0 {
		return out, nil
	}
	byID := map[index.SnapshotID]index.Snapshot{}
	if err := s.idx.Snapshots(ctx, func(sn index.Snapshot) error { byID[sn.ID] = sn; return nil }); err != nil {
		return nil, err
	}
	p := newProbe(f, hist)
	err := s.idx.EachSnapshotRefs(ctx, func(id index.SnapshotID, r *index.Refs) error {
		sn, ok := byID[id]
		if !ok { // deleted between the two scans
			return nil
		}
		if i, ok := p.held(r, sn.Time); ok {
			out[i] = append(out[i], sn)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: snapshots holding file %d: %w", f, err)
	}
	return out, nil
}

// SnapshotsHolding returns the snapshots that hold revision id, in
// creation order.
func (s *Store) SnapshotsHolding(ctx context.Context, id index.RevID) ([]index.Snapshot, error) {
	k, err := index.RefKey(id)
	if err != nil {
		return nil, err
	}
	var ids []index.SnapshotID
	err = s.idx.EachSnapshotRefs(ctx, func(sid index.SnapshotID, r *index.Refs) error {
		if r.Contains(k) {
			ids = append(ids, sid)
		}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	var out []index.Snapshot
	err = s.idx.Snapshots(ctx, func(sn index.Snapshot) error {
		if i := sort.Search(len(ids), func(i int) bool { return ids[i] >= sn.ID }); i < len(ids) && ids[i] == sn.ID {
			out = append(out, sn)
		}
		return nil
	})
	return out, err
}

// SnapshotRevision returns the revision of file f that the snapshot
// called name holds. An unknown snapshot, or a file the snapshot does not
// hold, gives an error matching ErrNotFound.
func (s *Store) SnapshotRevision(ctx context.Context, f index.FileID, name string) (index.RevID, error) {
	sn, err := s.idx.Snapshot(name)
	if err != nil {
		return index.NullRev, err
	}
	r, err := s.SnapshotRefs(sn.ID)
	if err != nil {
		return index.NullRev, err
	}
	hist, err := s.History(ctx, f)
	if err != nil {
		return index.NullRev, err
	}
	if i, ok := newProbe(f, hist).held(r, sn.Time); ok {
		return hist[i].ID(f), nil
	}
	return index.NullRev, fmt.Errorf("snapshot %q does not hold file %d: %w", name, f, ErrNotFound)
}

// probe finds the revision of one file that a reference set holds.
type probe struct {
	f    index.FileID
	hist []Revision
	all  *index.Refs // every revision of f; built on the first miss
}

func newProbe(f index.FileID, hist []Revision) *probe { return &probe{f: f, hist: hist} }

// held returns the index in hist of the revision r holds, trying first
// the newest revision stored by time t (unix nanoseconds).
func (p *probe) held(r *index.Refs, t int64) (int, bool) {
	i := sort.Search(len(p.hist), func(i int) bool { return p.hist[i].Time.UnixNano() > t }) - 1
	if i >= 0 {
		if k, err := index.RefKey(p.hist[i].ID(p.f)); err == nil && r.Contains(k) {
			return i, true
		}
	}
	if p.all == nil {
		p.all = index.NewRefs()
		for _, h := range p.hist {
			if k, err := index.RefKey(h.ID(p.f)); err == nil {
				p.all.Add(k)
			}
		}
	}
	both := roaring64.And(p.all, r)
	if both.IsEmpty() {
		return 0, false
	}
	rev := index.RefID(both.Minimum()).Rev
	j := sort.Search(len(p.hist), func(j int) bool { return p.hist[j].Rev >= rev })
	return j, j < len(p.hist) && p.hist[j].Rev == rev
}
