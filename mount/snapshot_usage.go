package mount

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// usageTTL: per-snapshot usage depends on the snapshots (every change to
// them goes through the snapshotter, which drops the cached figures) and
// on the live tree (a file recorded again or deleted changes what counts
// as live), which changes without telling the snapshotter. A cached
// figure older than this is computed again, so `ls`-like tools reading
// the xattr of every snapshot directory cost one computation, and the
// live tree's changes show within this long.
const usageTTL = 2 * time.Second

// usageCache holds the last computed usage of every snapshot.
type usageCache struct {
	mu   sync.Mutex
	at   time.Time
	list []objstore.SnapshotUsage
}

func (c *usageCache) invalidate() {
	c.mu.Lock()
	c.list = nil
	c.mu.Unlock()
}

// SnapshotUsages returns what each snapshot alone holds (see
// objstore.SnapshotUsage), the live files read from the store's live
// tree.
func (s *snapshotter) SnapshotUsages(ctx context.Context) ([]objstore.SnapshotUsage, error) {
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	if s.usage.list != nil && time.Since(s.usage.at) < usageTTL {
		return s.usage.list, nil
	}
	live, err := LiveFiles(s.st.Dir())
	if err != nil {
		return nil, err
	}
	list, err := s.st.SnapshotUsages(ctx, live)
	if err != nil {
		return nil, wrapCorrupt(err)
	}
	s.usage.list, s.usage.at = list, time.Now()
	return list, nil
}

// ExclusiveBytes implements fs.SnapshotSizer: the xattr of a snapshot's
// directory.
func (s *snapshotter) ExclusiveBytes(ctx context.Context, id index.SnapshotID) (uint64, error) {
	list, err := s.SnapshotUsages(ctx)
	if err != nil {
		return 0, err
	}
	for _, u := range list {
		if u.ID == id {
			return u.ExclusiveBytes, nil
		}
	}
	return 0, fmt.Errorf("snapshot %d: %w", id, index.ErrNotFound)
}

func (r remote) SnapshotUsages(ctx context.Context) ([]objstore.SnapshotUsage, error) {
	resp, err := r.call(ctx, Request{Op: "usage"})
	return resp.Usages, err
}
