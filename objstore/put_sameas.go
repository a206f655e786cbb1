package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/deltafs/deltafs/index"
)

// PutSameNoWait records req as a revision whose text is exactly the text
// of revision same, without reading or comparing it: a dedup of same.
// The caller vouches for the equality: it read same's text from this
// store (WriteText, Get) after TakeBacks returned gen, and src is that
// text, or a file it has compared with it byte for byte (a restore
// writes a revision back into the live file; the recording of that file
// is then a dedup of it, not a put of the whole text that rebuilt same
// again to compare, with both texts in memory: 875 MB for a 200 MiB file
// in a review).
//
// same may be a revision stored from a delta alone (index.FlagHashDeferred):
// the store then takes the content hash it computed when it last rebuilt
// same whole (WriteText into a file), and records it in same's entry,
// since a dedup shares its target's hash. The put reads src as PutFrom
// does instead when the store cannot vouch for same as the caller read
// it: a commit was taken back since gen (same's number may name another
// text now), same's hash is deferred and not learned that way or its
// entry not yet committed, or its size is not size. read is as for
// PutFrom: called once src is no longer read (at once for a dedup).
// req.Data and req.Delta must be unset.
func (s *Store) PutSameNoWait(ctx context.Context, req PutRequest, same index.RevID, gen uint64, src io.ReaderAt, size int64, read func()) (index.Entry, func() error, error) {
	if req.Data != nil || req.Delta != nil || req.DeltaOnly {
		return index.Entry{}, nil, errors.New("objstore: PutSame takes its text from src")
	}
	if err := ctx.Err(); err != nil {
		return index.Entry{}, nil, err
	}
	e, commit, ok, err := s.putSame(req, same, gen, uint64(size))
	if ok || err != nil {
		if read != nil {
			read()
		}
		return e, commit, err
	}
	return s.PutFrom(ctx, req, src, size, read)
}

// TakeBacks returns how many times the store has taken back puts whose
// commit the index refused (a full disk): their revision numbers are
// given out again, to other texts. PutSameNoWait's caller reads it before
// it reads the revision it vouches for.
func (s *Store) TakeBacks() uint64 { return s.takenBack.Load() }

// putSame is PutSameNoWait's dedup; ok is false when it cannot make one.
func (s *Store) putSame(req PutRequest, same index.RevID, gen, size uint64) (index.Entry, func() error, bool, error) {
	fail := func(err error) (index.Entry, func() error, bool, error) {
		return index.Entry{}, nil, false, fmt.Errorf("objstore: put file %d as %v: %w", req.File, same, err)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.takenBack.Load() != gen {
		return index.Entry{}, nil, false, nil
	}
	ce, err := s.entry(same)
	if err != nil {
		return fail(err)
	}
	target := same
	if ce.Kind == index.KindDedup {
		target = ce.Base
	}
	if ce, err = s.dataEntry(same, ce); err != nil {
		return fail(err)
	}
	if ce.Size != size {
		return index.Entry{}, nil, false, nil
	}
	if ce.Flags&index.FlagHashDeferred != 0 {
		h, ok := s.hashes.known(target, ce.Size)
		s.pmu.RLock()
		_, pending := s.pending[target]
		s.pmu.RUnlock()
		// A pending entry filled now would be replaced in the pending
		// map by its batch's commit (unpend), its dedup then read
		// against the index's deferred entry as a bad target.
		if !ok || pending {
			return index.Entry{}, nil, false, nil
		}
		// The hash joins target's entry in the batch that adds the new
		// revision: a dedup and its target agree on their hash
		// (dataEntry), and dedupWith finds target from now on.
		if err := s.canPut(); err != nil {
			return fail(err)
		}
		meta, err := s.fileMeta(ce.File)
		if err != nil {
			return fail(err)
		}
		ce.Hash, ce.Flags = h, ce.Flags&^index.FlagHashDeferred
		s.enqueue(ce, *meta)
	}
	e, commit, err := s.appendDedup(&req, target, ce)
	if err != nil {
		return fail(err)
	}
	return e, commit, true, nil
}

// learnedHashes remembers the content hashes of the latest deferred-hash
// revisions the store rebuilt whole into a file (WriteText), for
// PutSame: a restore reads a revision so, then puts it back.
type learnedHashes struct {
	mu sync.Mutex
	m  map[index.RevID]learnedHash
}

type learnedHash struct{ size, hash uint64 }

// maxLearned bounds learnedHashes; past it all are forgotten and the
// count starts again (a restore needs only the one it has just read).
const maxLearned = 256

// learn remembers hash for id, of size bytes, if still() says, under the
// lock forgetAll takes, that nothing was taken back since the entry was
// read (a take-back counts, then forgets: see Store.takeBack).
func (l *learnedHashes) learn(id index.RevID, size, hash uint64, still func() bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !still() {
		return
	}
	if l.m == nil || len(l.m) >= maxLearned {
		l.m = map[index.RevID]learnedHash{}
	}
	l.m[id] = learnedHash{size, hash}
}

func (l *learnedHashes) known(id index.RevID, size uint64) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.m[id]
	return h.hash, ok && h.size == size
}

// forgetAll forgets every learned hash (the revisions a refused commit
// took back, see Store.takeBack).
func (l *learnedHashes) forgetAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m = nil
}
