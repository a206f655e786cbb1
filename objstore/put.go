package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/deltafs/deltafs/index"
)

// PutRequest describes a new revision.
type PutRequest struct {
	File   index.FileID
	Data   []byte      // the fulltext; Put keeps it: do not modify it afterwards
	P1, P2 index.RevID // parents, null when absent
	Hints  []index.RevID

	// Delta, if set, is a delta the caller already has (e.g. carried in from
	// another store) that turns DeltaBase into Data. It is verified and, if
	// it passes the caps and is the smallest candidate, stored verbatim.
	Delta     []byte
	DeltaBase index.RevID

	// DeltaOnly makes a put from Delta alone: Data nil, Delta a CodecCopy
	// delta against DeltaBase == P1 (e.g. from delta.EncodeWrites) giving
	// Size bytes. Such a put costs what the delta costs, stores the
	// revision without a content hash (see the package doc) and may return
	// ErrNeedFulltext: then put the fulltext.
	DeltaOnly bool
	Size      uint64

	// Time, if set, is when the content was taken from its source (the
	// mount: just before it read the live file), recorded as the
	// revision's time (index.Entry.Time) instead of the time of the put.
	// A caller that skips a file whose ctime is older than its newest
	// revision's time relies on it: a put stamps its entry after hashing
	// and waiting for the writer lock, by which time the source may have
	// changed again. A Time after the put is taken as the put's time.
	Time time.Time

	// Name, if set, becomes the file's name in its record (the mount:
	// the path the content was read from), so that a deleted file is
	// found by the path it had last (FileMeta.Name; a new file's record
	// has the name it was made with). It costs nothing more: the put
	// writes the record anyway.
	Name string

	// SkipSame makes a put whose text is exactly P1's, when P1 is File's
	// newest revision (a rewrite that changed no byte: an editor's save
	// of an unmodified buffer, tar or rsync of the same content), store
	// nothing: the put returns P1's entry (its ID is P1) and only takes
	// Name. The sizes and hashes are compared first (P1's hash, unless
	// deferred), then the bytes.
	SkipSame bool
}

// revTime returns the time to record for a revision put now from req.
func revTime(req *PutRequest) int64 {
	now := time.Now()
	if req.Time.IsZero() || req.Time.After(now) {
		return now.UnixNano()
	}
	return req.Time.UnixNano()
}

// Put stores a new revision of req.File and returns its entry. The revision
// is durable when Put returns.
func (s *Store) Put(ctx context.Context, req PutRequest) (index.Entry, error) {
	if req.DeltaOnly {
		return s.putDelta(ctx, req)
	}
	e, commit, err := s.PutNoWait(ctx, req)
	if err != nil {
		return index.Entry{}, err
	}
	return e, commit()
}

// PutNoWait is Put (of a fulltext, not DeltaOnly) returning once the
// revision is appended, before it is durable: commit makes it durable, in
// one group commit with every revision appended before it, and returns
// the commit's error. Until then the revision can be read, and be the
// parent or base of later puts, but a crash loses it. A writer that has
// more to do than wait for the disk (the mount's recorder, reading the
// next revision) overlaps the commit with that work.
func (s *Store) PutNoWait(ctx context.Context, req PutRequest) (index.Entry, func() error, error) {
	if req.DeltaOnly {
		return index.Entry{}, nil, errors.New("objstore: PutNoWait of a delta-only put")
	}
	if err := ctx.Err(); err != nil {
		return index.Entry{}, nil, err
	}
	// No copy: an 8 MiB clone per put measured as much as the rest of a
	// small-edit put (page faults on fresh memory); callers hand it over.
	data := req.Data
	if data == nil {
		data = []byte{}
	}
	hash := s.cfg.hash(data)
	s.hashedBytes.Add(int64(len(data)))
	s.wmu.Lock()
	if p, ok := s.newestSame(ctx, &req, uint64(len(data)), hash, func(id index.RevID, pe index.Entry) bool {
		text, err := s.rebuild(ctx, id, pe, s.putCaches())
		return err == nil && bytes.Equal(text, data)
	}); ok {
		commit := s.keepNewest(&req, p)
		s.wmu.Unlock()
		return p, commit, nil
	}
	e, meta, err := s.prepare(ctx, &req, data, hash)
	if err != nil {
		s.wmu.Unlock()
		return index.Entry{}, nil, fmt.Errorf("objstore: put file %d: %w", req.File, err)
	}
	b := s.enqueue(e, meta)
	if e.Rev > 0 {
		s.latest.remove(index.RevID{File: e.File, Rev: e.Rev - 1})
	}
	if keepLatest(len(data), s.cfg.LatestBytes) {
		// A dedup's text is kept under the revision that holds it: a
		// rebuild of this one finds it there, and so does the next
		// revision of that history (a copy edited alike, the same edits
		// made again), rebuilt with one delta instead of from its
		// chain's root (M6's second run, the same 600 revisions again:
		// 26-29 of its 34 s of mount CPU were those chains).
		key := e.ID()
		if e.Kind == index.KindDedup {
			key = e.Base
		}
		s.latest.add(key, data)
	}
	s.wmu.Unlock()
	return e, func() error { return s.wait(b) }, nil
}

// prepare chooses how to store the revision and appends its record.
// Called with wmu held.
func (s *Store) prepare(ctx context.Context, req *PutRequest, data []byte, hash uint64) (index.Entry, index.FileMeta, error) {
	e, meta, err := s.nextEntry(req, uint64(len(data)), hash)
	if err != nil {
		return index.Entry{}, index.FileMeta{}, err
	}
	found, err := s.dedup(ctx, &e, data)
	if err != nil {
		return index.Entry{}, index.FileMeta{}, err
	}
	if !found {
		if err := s.store(ctx, &e, req, meta, data); err != nil {
			return index.Entry{}, index.FileMeta{}, err
		}
	}
	meta.Revs++
	named(meta, req)
	if e.Kind.IsSnapshot() {
		meta.LastSnap, meta.HasSnap = e.Rev, true
	}
	return e, *meta, nil
}

// nextEntry returns the entry of req's revision, of size bytes and
// content hash hash, before it is stored, and its file's metadata, once
// the store takes a put and req's parents exist. Called with wmu held.
func (s *Store) nextEntry(req *PutRequest, size, hash uint64) (index.Entry, *index.FileMeta, error) {
	meta, err := s.nextRevMeta(req.File)
	if err != nil {
		return index.Entry{}, nil, err
	}
	for _, p := range []index.RevID{req.P1, req.P2} {
		if _, err := s.checkRev(p); err != nil {
			return index.Entry{}, nil, fmt.Errorf("parent %v: %w", p, err)
		}
	}
	return index.Entry{File: req.File, Rev: index.Rev(meta.Revs), P1: req.P1, P2: req.P2,
		Size: size, Hash: hash, Time: revTime(req)}, meta, nil
}

// named takes req.Name, if any, as the name of the file meta records.
func named(meta *index.FileMeta, req *PutRequest) {
	if req.Name != "" {
		meta.Name = req.Name
	}
}

// canPut returns why the store takes no put, if it does not. Called
// with wmu held.
// nextRevMeta returns the metadata of file when a revision may be added
// to it: the store takes puts and the file has room for one more.
func (s *Store) nextRevMeta(file index.FileID) (*index.FileMeta, error) {
	if err := s.canPut(); err != nil {
		return nil, err
	}
	meta, err := s.fileMeta(file)
	if err != nil {
		return nil, err
	}
	if meta.Revs == math.MaxUint32 {
		return nil, fmt.Errorf("file %d has the maximum number of revisions", file)
	}
	return meta, nil
}

func (s *Store) canPut() error {
	switch {
	case s.closed:
		return ErrClosed
	case s.broken != nil:
		return s.broken
	case s.cfg.ReadOnly:
		return ErrReadOnly
	}
	// Refused before any byte is written, with a margin for the commit
	// (index/space.go): a commit refused later breaks the store.
	return s.idx.Room()
}

func (s *Store) checkRev(id index.RevID) (index.Entry, error) {
	if id.IsNull() {
		return index.Entry{}, nil
	}
	return s.entry(id)
}

// fileMeta returns the writer's copy of f's record. Called with wmu held.
func (s *Store) fileMeta(f index.FileID) (*index.FileMeta, error) {
	if m := s.files[f]; m != nil {
		return m, nil
	}
	m, err := s.idx.File(f)
	if err != nil {
		return nil, err
	}
	s.files[f] = &m
	return &m, nil
}

// dedup points e at an existing revision with the same content, if any. The
// hash only nominates candidates: the bytes are compared before sharing.
func (s *Store) dedup(ctx context.Context, e *index.Entry, data []byte) (bool, error) {
	return s.dedupWith(ctx, e, func(id index.RevID, ce index.Entry) (bool, error) {
		text, err := s.rebuild(ctx, id, ce, s.putCaches())
		if err != nil {
			s.log.Warn("dedup candidate unreadable", "rev", id, "err", err)
			return false, nil
		}
		return bytes.Equal(text, data), nil
	})
}

// dedupWith is dedup with same telling whether candidate id (entry ce,
// of e's hash and size) holds the revision's text; an error ends the
// search.
func (s *Store) dedupWith(ctx context.Context, e *index.Entry, same func(id index.RevID, ce index.Entry) (bool, error)) (bool, error) {
	ids, err := s.byHash(e.Hash)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		ce, err := s.entry(id)
		if err != nil || ce.Size != e.Size || ce.Lost() {
			continue
		}
		if ok, err := same(id, ce); err != nil || !ok {
			if err != nil {
				return false, err
			}
			continue // a hash collision, or unreadable: store separately
		}
		dedupOf(e, id, ce)
		return true, nil
	}
	return false, nil
}

// newestSame returns the entry of req.P1 and true when req skips its put
// (PutRequest.SkipSame): P1 is req.File's newest revision, of size bytes
// and, unless its hash is deferred, of content hash hash, and same says
// it holds the text. Called with wmu held.
func (s *Store) newestSame(ctx context.Context, req *PutRequest, size, hash uint64, same func(index.RevID, index.Entry) bool) (index.Entry, bool) {
	if !req.SkipSame || req.P1.IsNull() || req.P1.File != req.File || ctx.Err() != nil || s.canPut() != nil {
		return index.Entry{}, false
	}
	meta, err := s.fileMeta(req.File)
	if err != nil || meta.Revs == 0 || req.P1.Rev != index.Rev(meta.Revs-1) {
		return index.Entry{}, false
	}
	p, err := s.entry(req.P1)
	if err != nil || p.Lost() || p.Size != size || p.Flags&index.FlagHashDeferred == 0 && p.Hash != hash {
		return index.Entry{}, false
	}
	return p, same(req.P1, p)
}

// keepNewest ends a put that newestSame skipped: it takes req.Name and
// returns the commit, which waits for p too while p is still pending
// (appended by a put not yet durable). Called with wmu held.
func (s *Store) keepNewest(req *PutRequest, p index.Entry) func() error {
	meta, err := s.fileMeta(req.File)
	if err != nil {
		return func() error { return err }
	}
	s.pmu.RLock()
	_, pending := s.pending[p.ID()]
	s.pmu.RUnlock()
	renamed := req.Name != "" && req.Name != meta.Name
	if !pending && !renamed {
		return func() error { return nil }
	}
	named(meta, req)
	b := s.enqueueFile(req.File, *meta)
	return func() error {
		err := s.wait(b)
		if err == nil && pending {
			// p's own batch went before b; if its commit failed (a write
			// error breaks the store), b's may still have succeeded.
			s.wmu.Lock()
			err = s.broken
			s.wmu.Unlock()
		}
		return err
	}
}

// dedupOf makes e a dedup of revision id, whose entry is ce.
func dedupOf(e *index.Entry, id index.RevID, ce index.Entry) {
	e.Kind, e.Base = index.KindDedup, id
	e.ChainLen, e.ChainBytes, e.Seg, e.Off = ce.ChainLen, ce.ChainBytes, ce.Seg, ce.Off
}

// keepLatest reports whether a put keeps its text of n bytes as the
// file's latest. A text over the latest budget is kept alone (the next
// put of an 8 MiB file would otherwise rebuild its parent), unless it is
// a big fulltext (bigFull): then holding it would pin hundreds of MiB for
// as long as no other file is put (M1: a 1 GiB text, and a read of it
// cloned it, 3 GB of RSS), while rebuilding it costs a read and an S2
// decode at GB/s, and its in-place changes (delta-only puts) never need
// it.
func keepLatest(n int, budget int64) bool {
	return n < bigFull || int64(n) <= budget
}
