package objstore

import (
	"context"
	"fmt"

	"github.com/deltafs/deltafs/index"
)

// SnapshotUsage is what one snapshot alone holds: the revisions no other
// snapshot references and that are not a live file's newest revision,
// and their stored record bytes. That is what deleting the snapshot lets
// "deltafs gc --prune-unsnapshotted" free (the default gc keeps live
// files' history, so it frees only the part that belongs to deleted
// files). The bytes are the records' own: a kept revision stored as a
// delta against one of them is stored again by gc, which may give a
// little back.
type SnapshotUsage struct {
	ID             index.SnapshotID `json:"id"`
	Name           string           `json:"name"`
	ExclusiveRevs  int64            `json:"exclusive_revisions"`
	ExclusiveBytes uint64           `json:"exclusive_bytes"`
}

// SnapshotUsages returns the usage of every snapshot, in creation order.
// live names the files of the live tree (see GCOptions.Live).
//
// Cost: two roaring operations per snapshot to find the revisions
// exactly one snapshot references (a running "once" and "more than once"
// pair of bitmaps over all of them, so no snapshot is compared with every
// other), then one index lookup per exclusive revision. It follows the
// number of revisions the snapshots hold, not snapshots squared, and
// reads no segment data.
func (s *Store) SnapshotUsages(ctx context.Context, live map[index.FileID]bool) ([]SnapshotUsage, error) {
	var snaps []index.Snapshot
	var sets []*index.Refs
	once, many := index.NewRefs(), index.NewRefs()
	err := s.idx.SnapshotRefsAll(func(sn index.Snapshot, r *index.Refs) error {
		snaps, sets = append(snaps, sn), append(sets, r)
		both := index.NewRefs()
		both.Or(once)
		both.And(r)
		many.Or(both)
		once.Or(r)
		once.AndNot(many)
		return nil
	})
	if err != nil {
		return nil, err
	}
	newest := map[index.FileID]index.Rev{}
	out := make([]SnapshotUsage, len(snaps))
	for i, r := range sets {
		u := SnapshotUsage{ID: snaps[i].ID, Name: snaps[i].Name}
		ex := index.NewRefs()
		ex.Or(r)
		ex.And(once)
		it := ex.Iterator()
		for it.HasNext() {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			id := index.RefID(it.Next())
			if live[id.File] {
				n, err := s.newestRev(id.File, newest)
				if err != nil {
					return nil, err
				}
				if n == id.Rev {
					continue
				}
			}
			e, err := s.idx.Entry(id)
			if err != nil {
				return nil, fmt.Errorf("snapshot %q: %w", u.Name, err)
			}
			u.ExclusiveRevs++
			u.ExclusiveBytes += uint64(e.Stored)
		}
		out[i] = u
	}
	return out, nil
}

// newestRev returns file f's newest revision, through memo.
func (s *Store) newestRev(f index.FileID, memo map[index.FileID]index.Rev) (index.Rev, error) {
	if r, ok := memo[f]; ok {
		return r, nil
	}
	e, ok, err := s.idx.Latest(f) // not Revs-1: gc leaves gaps
	if err != nil {
		return 0, err
	}
	r := e.Rev
	if !ok {
		r = index.Rev(^uint32(0)) // no revision: matches none
	}
	memo[f] = r
	return r, nil
}
