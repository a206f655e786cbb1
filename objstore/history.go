package objstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/deltafs/deltafs/index"
)

// History of one file, for "deltafs log", "cat" and "restore" and the
// mount's .history directory. A file's revisions are one prefix scan of
// its own r/<file> rows, so listing them costs what that file has,
// whatever else the store holds. Which snapshots hold a revision is
// answered from the file's own hold rows (index.EachHolder: written at
// each snapshot for the files that changed since the previous one), so it
// too costs what the file has; a store whose snapshots predate the rows,
// or that a build without them changed since (their stamp no longer
// matches: index/holds.go; gc and repack rebuild them), falls back to one pass over the stored reference sets (index.RefKey:
// Rev<<32 | File), each probed in its bytes for the one file
// (index.RawRefs), a few microseconds a snapshot.

// Revision is one revision of a file as history views show it.
type Revision struct {
	Rev        index.Rev
	Time       time.Time      // when it was stored
	Size       uint64         // fulltext length
	Kind       index.BaseKind // how it is stored
	Base       index.RevID    // delta base or dedup target; null for a fulltext
	Base2      index.RevID    // second delta base (index.KindP1P2); else null
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
		Rev: e.Rev, Time: time.Unix(0, e.Time).UTC(), Size: e.Size, Kind: e.Kind, Base: e.Base, Base2: e.Base2,
		ChainLen: e.ChainLen, ChainBytes: e.ChainBytes, Stored: e.Stored, P1: e.P1, P2: e.P2, Flags: e.Flags,
	}
}

// History returns every committed revision of file f, oldest first. A
// file that was never allocated gives an error matching ErrNotFound; one
// allocated but never written gives no revisions.
func (s *Store) History(ctx context.Context, f index.FileID) ([]Revision, error) {
	var out []Revision
	err := s.EachRevision(ctx, f, func(n uint64) { out = make([]Revision, 0, n) }, func(r Revision) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// EachRevision is History one revision at a time, with no list: it calls
// count with the number of revisions the file has (fn may be called that
// many times, fewer if some are not committed yet), then fn with each.
func (s *Store) EachRevision(ctx context.Context, f index.FileID, count func(uint64), fn func(Revision) error) error {
	m, err := s.idx.File(f)
	if err != nil {
		return fmt.Errorf("objstore: history of file %d: %w", f, err)
	}
	count(uint64(m.Revs))
	err = s.idx.Revisions(ctx, f, func(e index.Entry) error { return fn(revisionOf(e)) })
	if err != nil {
		return fmt.Errorf("objstore: history of file %d: %w", f, err)
	}
	return nil
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
// to hist[i].
func (s *Store) Holding(ctx context.Context, f index.FileID, hist []Revision) ([][]index.Snapshot, error) {
	out := make([][]index.Snapshot, len(hist))
	if len(hist) == 0 {
		return out, nil
	}
	held, err := s.HoldingRevs(ctx, f)
	if err != nil {
		return nil, err
	}
	for i, r := range hist {
		out[i] = held[r.Rev]
	}
	return out, nil
}

// HoldingRevs returns the snapshots holding each revision of file f that
// some snapshot holds, in creation order. It walks each snapshot's
// reference set once, in its stored bytes (index.RawRefs), reading only
// the containers that can hold f.
func (s *Store) HoldingRevs(ctx context.Context, f index.FileID) (map[index.Rev][]index.Snapshot, error) {
	byID := map[index.SnapshotID]index.Snapshot{}
	if err := s.idx.Snapshots(ctx, func(sn index.Snapshot) error { byID[sn.ID] = sn; return nil }); err != nil {
		return nil, err
	}
	out := map[index.Rev][]index.Snapshot{}
	err := s.eachHolding(ctx, f, func(id index.SnapshotID, rev index.Rev) {
		if sn, ok := byID[id]; ok { // else deleted since
			out[rev] = append(out[rev], sn)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: snapshots holding file %d: %w", f, err)
	}
	return out, nil
}

// EachHolder calls fn(i, rev) for every snapshot list[i] that holds
// revision rev of file f, in list order. list must be the store's
// snapshots in creation order (SnapshotList, or a copy the caller keeps
// up to date); snapshots not in it are left out. It reads f's hold rows,
// or, when they are not complete for the current snapshots (see
// index.EachHolder), probes every snapshot's reference set.
func (s *Store) EachHolder(ctx context.Context, f index.FileID, list []index.Snapshot, fn func(i int, rev index.Rev)) error {
	ok, err := s.idx.EachHolder(ctx, f, list, fn)
	if err == nil && !ok {
		err = s.eachHolding(ctx, f, func(id index.SnapshotID, rev index.Rev) {
			if i, found := slices.BinarySearchFunc(list, id, func(sn index.Snapshot, id index.SnapshotID) int {
				return cmp.Compare(sn.ID, id)
			}); found {
				fn(i, rev)
			}
		})
	}
	if errors.Is(err, index.ErrDecode) && !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err != nil {
		return fmt.Errorf("objstore: snapshots holding file %d: %w", f, err)
	}
	return nil
}

// eachHolding calls fn for every snapshot and revision of f it holds, in
// snapshot creation order.
func (s *Store) eachHolding(ctx context.Context, f index.FileID, fn func(index.SnapshotID, index.Rev)) error {
	var revs []index.Rev
	err := s.idx.EachSnapshotRawRefs(ctx, func(id index.SnapshotID, r index.RawRefs) error {
		var err error
		if revs, err = r.FileRevs(revs[:0], f); err != nil {
			return err
		}
		for _, rev := range revs {
			fn(id, rev)
		}
		return nil
	})
	if errors.Is(err, index.ErrDecode) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// SnapshotsHolding returns the snapshots that hold revision id, in
// creation order.
func (s *Store) SnapshotsHolding(ctx context.Context, id index.RevID) ([]index.Snapshot, error) {
	var ids []index.SnapshotID
	err := s.eachHolding(ctx, id.File, func(sid index.SnapshotID, rev index.Rev) {
		if rev == id.Rev {
			ids = append(ids, sid)
		}
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
// called name holds (the newest, should it hold several). An unknown
// snapshot, or a file the snapshot does not hold, gives an error matching
// ErrNotFound.
func (s *Store) SnapshotRevision(ctx context.Context, f index.FileID, name string) (index.RevID, error) {
	sn, err := s.idx.Snapshot(name)
	if err != nil {
		return index.NullRev, err
	}
	r, err := s.SnapshotRefs(sn.ID)
	if err != nil {
		return index.NullRev, err
	}
	m, err := s.idx.File(f)
	if err != nil {
		return index.NullRev, err
	}
	for rev := int64(m.Revs) - 1; rev >= 0; rev-- {
		id := index.RevID{File: f, Rev: index.Rev(rev)}
		if k, err := index.RefKey(id); err == nil && r.Contains(k) {
			return id, nil
		}
	}
	return index.NullRev, fmt.Errorf("snapshot %q does not hold file %d: %w", name, f, ErrNotFound)
}
