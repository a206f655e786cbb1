package objstore

import (
	"context"
	"fmt"

	"github.com/deltafs/deltafs/index"
)

// Problem is one bad revision found by Verify.
type Problem struct {
	Rev index.RevID
	Err error
}

func (p Problem) String() string { return fmt.Sprintf("%v: %v", p.Rev, p.Err) }

// verifyCacheBytes bounds the texts Verify keeps to rebuild neighbours; it
// uses its own cache so that it only trusts texts it has itself checked.
const verifyCacheBytes = 64 << 20

// Verify checks every revision: its own record (checksum, agreement with the
// index, within the committed tail), the rebuild of its whole chain and its
// content hash (a revision stored from a delta alone has none: it is
// rebuilt and its records checked, and one log line counts them). It calls report for every bad revision and returns how many
// it found; the error is for failures of the walk itself (e.g. ctx).
func (s *Store) Verify(ctx context.Context, report func(Problem)) (int, error) {
	return s.VerifyProgress(ctx, report, nil)
}

// VerifyProgress is Verify that also calls progress (if not nil) after each
// revision with the number checked and the total.
func (s *Store) VerifyProgress(ctx context.Context, report func(Problem), progress func(done, total int)) (int, error) {
	var ids []index.RevID
	unhashed := 0
	err := s.idx.All(ctx, func(e index.Entry) error {
		ids = append(ids, e.ID())
		if e.Flags&index.FlagHashDeferred != 0 {
			unhashed++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	tail, err := s.idx.Tail() // read after the entries: covers all of them
	if err != nil {
		return 0, err
	}
	cache := caches{full: newLRU[index.RevID](verifyCacheBytes)}
	bad := 0
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return bad, err
		}
		if err := s.verifyOne(ctx, id, tail, cache); err != nil {
			bad++
			report(Problem{Rev: id, Err: err})
		}
		if progress != nil {
			progress(i+1, len(ids))
		}
	}
	if unhashed > 0 {
		s.log.Info("revisions stored from a delta alone have no content hash to compare: checked by their chain's record checksums and rebuild only",
			"revisions", unhashed)
	}
	return bad, nil
}

func (s *Store) verifyOne(ctx context.Context, id index.RevID, tail index.Tail, c caches) error {
	e, err := s.idx.Entry(id)
	if err != nil {
		return err
	}
	if e.Kind != index.KindDedup {
		if e.Seg > tail.Seg || e.Seg == tail.Seg && e.Off+uint64(e.Stored) > tail.End {
			return corrupt(id, &e, fmt.Errorf("record beyond the committed tail %d:%d", tail.Seg, tail.End))
		}
		if _, err := s.readRecord(id, &e); err != nil {
			return err
		}
	}
	// Its own cache only: the store's may hold texts Verify has not checked.
	_, err = s.rebuild(ctx, id, e, c)
	return err
}
