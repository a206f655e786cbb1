package objstore

import (
	"errors"
	"fmt"

	"github.com/deltafs/deltafs/index"
)

// batch collects the puts appended since the last group commit.
type batch struct {
	b    index.Batch
	done chan struct{}
	err  error
}

// enqueue adds e to the open batch. Called with wmu held.
func (s *Store) enqueue(e index.Entry, meta index.FileMeta) *batch {
	if s.open == nil {
		s.open = &batch{done: make(chan struct{}), b: index.Batch{Files: map[index.FileID]index.FileMeta{}}}
	}
	b := s.open
	b.b.Entries = append(b.b.Entries, e)
	b.b.Files[e.File] = meta
	b.b.Tail = s.segs.tail()
	s.pmu.Lock()
	s.pending[e.ID()] = e
	if e.HashIndexed() {
		s.pendingHash[e.Hash] = append(s.pendingHash[e.Hash], e.ID())
	}
	s.pmu.Unlock()
	return b
}

// enqueueFile adds file f's record, meta, to the open batch. Called with
// wmu held.
func (s *Store) enqueueFile(f index.FileID, meta index.FileMeta) *batch {
	if s.open == nil {
		s.open = &batch{done: make(chan struct{}), b: index.Batch{Files: map[index.FileID]index.FileMeta{}}}
	}
	s.open.b.Files[f] = meta
	s.open.b.Tail = s.segs.tail()
	return s.open
}

// wait makes b durable: whoever takes cmu first flushes the open batch, which
// holds every put appended so far, so one fsync serves them all.
func (s *Store) wait(b *batch) error {
	s.cmu.Lock()
	select {
	case <-b.done:
		s.cmu.Unlock()
		return b.err
	default:
	}
	// b is not done, so it is still the open batch: lead its commit.
	s.wmu.Lock()
	cur := s.open
	s.open = nil
	dirty := s.segs.takeDirty()
	s.wmu.Unlock()
	cur.err = s.flush(cur, dirty)
	s.unpend(cur)
	close(cur.done)
	s.cmu.Unlock()
	if cur != b {
		panic("objstore: group commit lost a batch") // unreachable: see above
	}
	return b.err
}

// flush fsyncs the segments, then commits the index entries.
func (s *Store) flush(b *batch, dirty []uint32) error {
	s.commits.Add(1)
	s.puts.Add(int64(len(b.b.Entries)))
	err := s.segs.sync(dirty)
	if err == nil {
		err = s.idx.Commit(&b.b)
	}
	if err != nil && errors.Is(err, index.ErrRefused) {
		err = fmt.Errorf("objstore: commit of %d revisions: %w", len(b.b.Entries), err)
		rerr := s.takeBack(b, err)
		if rerr == nil {
			return err
		}
		err = fmt.Errorf("%w (taking the puts back: %w)", err, rerr)
	}
	if err != nil {
		err = fmt.Errorf("objstore: commit of %d revisions: %w", len(b.b.Entries), err)
		s.wmu.Lock()
		s.broken = err
		s.wmu.Unlock()
		s.log.Error("group commit failed; store refuses further writes", "err", err)
	}
	return err
}

func (s *Store) unpend(b *batch) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	for _, e := range b.b.Entries {
		delete(s.pending, e.ID())
		ids := s.pendingHash[e.Hash][:0]
		for _, id := range s.pendingHash[e.Hash] {
			if id != e.ID() {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(s.pendingHash, e.Hash)
		} else {
			s.pendingHash[e.Hash] = ids
		}
	}
}

// entry returns the entry of id, pending or committed.
func (s *Store) entry(id index.RevID) (index.Entry, error) {
	s.pmu.RLock()
	e, ok := s.pending[id]
	s.pmu.RUnlock()
	if ok {
		return e, nil
	}
	return s.idx.Entry(id)
}

// byHash returns revisions with their own data whose hash is h.
func (s *Store) byHash(h uint64) ([]index.RevID, error) {
	s.pmu.RLock()
	ids := append([]index.RevID(nil), s.pendingHash[h]...)
	s.pmu.RUnlock()
	more, err := s.idx.ByHash(h)
	return append(ids, more...), err
}

// takeBack undoes the puts of b, whose commit the index refused before
// writing anything (a full disk, index/space.go), and those appended
// since, in the open batch, which fail with err too: their records are
// cut off the segments back to the committed tail, their texts leave
// the caches (their revision numbers will be taken again) and the
// writer's file records are read again from the index. The store then
// goes on as if those puts had never been made. Called by the commit
// leader, cmu held; b's waiters get err from wait.
func (s *Store) takeBack(b *batch, err error) error {
	tail, terr := s.idx.Tail()
	if terr != nil {
		return terr
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if o := s.open; o != nil {
		s.open = nil
		o.err = err
		s.forget(o)
		s.unpend(o)
		close(o.done)
	}
	s.forget(b)
	clear(s.files)
	// Their revision numbers will be taken again, by other texts: a
	// hash learned from one of them would be taken for theirs, and a
	// caller that read one of them must not take it for its successor
	// (PutSameNoWait).
	s.takenBack.Add(1)
	s.hashes.forgetAll()
	return s.segs.rewind(tail)
}

// forget drops the texts of b's revisions from the caches.
func (s *Store) forget(b *batch) {
	for _, e := range b.b.Entries {
		s.cache.remove(e.ID())
		s.latest.remove(e.ID())
	}
}
