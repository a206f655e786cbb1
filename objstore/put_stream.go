package objstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/index"
)

// PutFrom is PutNoWait of the content of src, read from its start (size
// is its expected length; the content is whatever src holds, up to its
// end). read, if not nil, is called once src is no longer read.
//
// A big fulltext (bigFull and more) of a revision with no parent and no
// hints, which the store can only store whole (a new file's first
// revision, M1's 1 GiB), is streamed (chunked_stream.go): read, hashed,
// encoded and written to its segment chunk by chunk, the three
// overlapping, instead of read whole and then encoded and then written;
// it holds a few chunks, not the text and its encoding. Its chunks are S2 or,
// when the cores are the bottleneck, raw, and the revision is then marked
// index.FlagFastZstd, so that a repack compresses it again. If src's
// length is not size once read, or a revision of the same size and hash
// exists (a dedup candidate, whose bytes a put compares), it is read
// whole and put as PutNoWait does instead.
func (s *Store) PutFrom(ctx context.Context, req PutRequest, src io.ReaderAt, size int64, read func()) (index.Entry, func() error, error) {
	if read == nil {
		read = func() {}
	}
	streamed := streams(&req, size)
	if streamed {
		e, commit, err := s.putStream(ctx, req, src, size, read)
		if !errors.Is(err, errStreamFallback) {
			return e, commit, err
		}
	}
	if s.mayDedupFrom(&req, size, streamed) {
		e, commit, ok, err := s.dedupFrom(ctx, req, src, size)
		if ok || err != nil {
			read()
			return e, commit, err
		}
	}
	data, err := ReadAll(src, size)
	read()
	if err != nil {
		return index.Entry{}, nil, fmt.Errorf("objstore: put file %d: read: %w", req.File, err)
	}
	req.Data = data
	return s.PutNoWait(ctx, req)
}

// dedupFrom puts a big text already in the store (a copy, a save that
// changed nothing) as a dedup revision without reading it into memory:
// it hashes src in blocks and compares it, block by block, with each
// revision of that hash and size (rebuilt), outside the write lock,
// which it takes only to add the entry (the candidate checked again
// there). A put from the whole text held it and the candidate at once
// (2x the file: 462 MiB of RSS for a 256 MiB copy). ok is false when no
// revision matches (nothing stored).
func (s *Store) dedupFrom(ctx context.Context, req PutRequest, src io.ReaderAt, size int64) (e index.Entry, commit func() error, ok bool, err error) {
	fail := func(err error) (index.Entry, func() error, bool, error) {
		return index.Entry{}, nil, false, fmt.Errorf("objstore: put file %d: %w", req.File, err)
	}
	if err := ctx.Err(); err != nil {
		return index.Entry{}, nil, false, err
	}
	d := xxhash.New()
	if n, err := copyBlocks(d, src, size); err != nil || n != size {
		if err != nil {
			return fail(fmt.Errorf("read: %w", err))
		}
		return index.Entry{}, nil, false, nil // it changed size: put it whole
	}
	s.hashedBytes.Add(size)
	probe := index.Entry{Size: uint64(size), Hash: d.Sum64()}
	if e, commit, ok := s.keepIfSame(ctx, &req, probe, src); ok {
		return e, commit, true, nil
	}
	found, err := s.dedupWith(ctx, &probe, func(id index.RevID, ce index.Entry) (bool, error) { return s.sameAs(ctx, id, ce, src) })
	if err != nil || !found {
		if err != nil {
			return fail(err)
		}
		return index.Entry{}, nil, false, nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ce, err := s.entry(probe.Base)
	if err != nil || ce.Hash != probe.Hash || ce.Size != probe.Size || ce.Seg != probe.Seg || ce.Off != probe.Off {
		return index.Entry{}, nil, false, nil // moved or gone since (gc): put it whole
	}
	e, commit, err = s.appendDedup(&req, probe.Base, ce)
	if err != nil {
		return fail(err)
	}
	return e, commit, true, nil
}

// appendDedup adds req's revision as a dedup of target (entry ce, which
// has its own data and hash) and returns it with its commit. Called
// with wmu held.
func (s *Store) appendDedup(req *PutRequest, target index.RevID, ce index.Entry) (index.Entry, func() error, error) {
	e, meta, err := s.nextEntry(req, ce.Size, ce.Hash)
	if err != nil {
		return index.Entry{}, nil, err
	}
	dedupOf(&e, target, ce)
	meta.Revs++
	named(meta, req)
	b := s.enqueue(e, *meta)
	if e.Rev > 0 {
		s.latest.remove(index.RevID{File: e.File, Rev: e.Rev - 1})
	}
	return e, func() error { return s.wait(b) }, nil
}

// keepIfSame is dedupFrom's PutRequest.SkipSame: it ends the put of
// src, of probe's size and hash, keeping req.P1 when that is the file's
// newest revision with src's content, compared outside the write lock
// (sameAs) and checked again under it.
func (s *Store) keepIfSame(ctx context.Context, req *PutRequest, probe index.Entry, src io.ReaderAt) (index.Entry, func() error, bool) {
	if !req.SkipSame {
		return index.Entry{}, nil, false
	}
	// A parent whose hash is deferred is left to the put from the whole
	// text, which compares it with the text it reads anyway.
	var held index.Entry
	s.wmu.Lock()
	_, ok := s.newestSame(ctx, req, probe.Size, probe.Hash, func(_ index.RevID, pe index.Entry) bool {
		held = pe
		return pe.Flags&index.FlagHashDeferred == 0
	})
	s.wmu.Unlock()
	if !ok {
		return index.Entry{}, nil, false
	}
	if same, err := s.sameAs(ctx, req.P1, held, src); err != nil || !same {
		return index.Entry{}, nil, false
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	p, ok := s.newestSame(ctx, req, probe.Size, probe.Hash, func(_ index.RevID, pe index.Entry) bool { return pe == held })
	if !ok {
		return index.Entry{}, nil, false // changed since: put it as usual
	}
	return p, s.keepNewest(req, p), true
}

// sameAs reports whether revision id (entry ce) holds exactly src's
// content: a chunked fulltext is read and compared a group of chunks at
// a time, in a few MiB whatever its size; any other revision is rebuilt
// whole and compared block by block. An unreadable candidate is no
// match (logged).
func (s *Store) sameAs(ctx context.Context, id index.RevID, ce index.Entry, src io.ReaderAt) (bool, error) {
	if !chunkedFull(&ce) {
		text, err := s.rebuild(ctx, id, ce, s.putCaches())
		if err != nil {
			s.log.Warn("dedup candidate unreadable", "rev", id, "err", err)
			return false, nil
		}
		return sameBlocks(src, text)
	}
	var fileBuf []byte
	errDiffers := errors.New("differs")
	var readErr error
	got := func(off uint64, text []byte) error {
		if err := ctx.Err(); err != nil {
			readErr = err
			return err
		}
		if cap(fileBuf) < len(text) {
			fileBuf = make([]byte, len(text))
		}
		b := fileBuf[:len(text)]
		if n, err := src.ReadAt(b, int64(off)); n < len(b) {
			if err != nil && !errors.Is(err, io.EOF) {
				readErr = err
			}
			return errDiffers // (shorter: a full read may come with io.EOF)
		}
		if !bytes.Equal(b, text) {
			return errDiffers
		}
		return nil
	}
	err := s.walkChunked(id, &ce, nil, got)
	switch {
	case readErr != nil:
		return false, readErr
	case errors.Is(err, errDiffers):
		return false, nil
	case err != nil:
		s.log.Warn("dedup candidate unreadable", "rev", id, "err", err)
		return false, nil
	}
	// Every byte of the candidate matched; src may be longer.
	var one [1]byte
	n, _ := src.ReadAt(one[:], int64(ce.Size))
	return n == 0, nil
}

// mayDedupFrom reports whether a put from a file of size bytes should
// look for a revision with its content before reading it whole
// (dedupFrom): a big text that the streamed put found a revision of the
// same hash and size for, or one as long as a parent or hint (a rewrite
// that may have changed nothing, a copy, a restore). Others would pay a
// read and a hash of the file for nothing.
func (s *Store) mayDedupFrom(req *PutRequest, size int64, streamed bool) bool {
	if size < bigFull || !s.cfg.xxhash || req.DeltaOnly || req.Delta != nil {
		return false
	}
	if streamed {
		return true
	}
	// A parent or hint of the same size may hold the same text: a save
	// that changed nothing, a copy, a restore (its P2).
	for _, id := range append([]index.RevID{req.P1, req.P2}, req.Hints...) {
		if id.IsNull() {
			continue
		}
		if p, err := s.entry(id); err == nil && p.Size == uint64(size) {
			return true
		}
	}
	return false
}

// copyBlocks writes src's first size bytes to w in blocks and returns
// how many it read (fewer: src is shorter now).
func copyBlocks(w io.Writer, src io.ReaderAt, size int64) (int64, error) {
	buf := make([]byte, 1<<20)
	var off int64
	for off < size {
		n, err := src.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		w.Write(buf[:n])
		off += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return off, err
		}
	}
	return off, nil
}

// sameBlocks reports whether src holds exactly text, read in blocks.
func sameBlocks(src io.ReaderAt, text []byte) (bool, error) {
	buf := make([]byte, 1<<20)
	for off := 0; ; off += len(buf) {
		n, err := src.ReadAt(buf, int64(off))
		if n > len(text)-off || !bytes.Equal(buf[:n], text[off:off+n]) {
			return false, nil
		}
		if errors.Is(err, io.EOF) {
			return off+n == len(text), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// errStreamFallback: the streamed put did not store the revision; put
// it from the whole text.
var errStreamFallback = errors.New("put from the whole text")

// streams reports whether a put of req from a source of size bytes is
// streamed: a big fulltext with nothing to delta or dedup it against but
// a revision of the same hash, checked after.
func streams(req *PutRequest, size int64) bool {
	return size >= bigFull && size <= maxPayload-recOverhead && req.Data == nil && !req.DeltaOnly &&
		req.Delta == nil && req.P1.IsNull() && req.P2.IsNull() && len(req.Hints) == 0
}

// putStream is PutFrom's streamed put; errStreamFallback means nothing
// was stored and src may still be read.
func (s *Store) putStream(ctx context.Context, req PutRequest, src io.ReaderAt, size int64, read func()) (index.Entry, func() error, error) {
	if err := ctx.Err(); err != nil {
		read()
		return index.Entry{}, nil, err
	}
	s.wmu.Lock()
	e, meta, err := s.prepareStream(ctx, &req, src, size)
	if err != nil {
		s.wmu.Unlock()
		if errors.Is(err, errStreamFallback) {
			return index.Entry{}, nil, err
		}
		read()
		return index.Entry{}, nil, fmt.Errorf("objstore: put file %d: %w", req.File, err)
	}
	b := s.enqueue(e, meta)
	if e.Rev > 0 {
		s.latest.remove(index.RevID{File: e.File, Rev: e.Rev - 1})
	}
	s.wmu.Unlock()
	read()
	return e, func() error { return s.wait(b) }, nil
}

// prepareStream streams src into a new record and makes its entry.
// Called with wmu held.
func (s *Store) prepareStream(ctx context.Context, req *PutRequest, src io.ReaderAt, size int64) (index.Entry, index.FileMeta, error) {
	meta, err := s.nextRevMeta(req.File)
	if err != nil {
		return index.Entry{}, index.FileMeta{}, err
	}
	n := (size + chunkSize - 1) / chunkSize
	f, seg, start, err := s.segs.beginAppend(recOverhead + chunkHeaderLen + chunkEntryLen*n + size)
	if err != nil {
		return index.Entry{}, index.FileMeta{}, err
	}
	e := index.Entry{File: req.File, Rev: index.Rev(meta.Revs), Size: uint64(size), Time: revTime(req),
		Kind: index.KindFull, Seg: seg, Off: uint64(start)}
	end, err := s.writeStream(ctx, &e, src, f, start)
	if err == nil {
		// Raised only now: a stream that falls back stores no chunked
		// record, and an older binary may still open the store.
		err = s.needFormat(formatLateTable)
	}
	if err != nil {
		if cut := s.segs.abortAppend(f, start); cut != nil {
			// What the stream wrote lies past the tail: a later record
			// shorter than it would leave some of it behind.
			s.broken = cut
			s.log.Error("streamed record not cut off; store refuses further writes", "err", cut)
			return index.Entry{}, index.FileMeta{}, fmt.Errorf("%w (cutting it off after: %v)", cut, err)
		}
		return index.Entry{}, index.FileMeta{}, err
	}
	s.segs.endAppend(end)
	meta.Revs++
	named(meta, req)
	meta.LastSnap, meta.HasSnap = e.Rev, true
	return e, *meta, nil
}

// writeStream writes e's record at start in f and fills in e's hash,
// flags and stored length; it returns the record's end.
func (s *Store) writeStream(ctx context.Context, e *index.Entry, src io.ReaderAt, f *os.File, start int64) (int64, error) {
	out, err := streamChunked(ctx, src, int64(e.Size), f, start+recHeaderLen, s.cfg.encoders)
	if errors.Is(err, errStreamSize) {
		return 0, errStreamFallback
	}
	if err != nil {
		return 0, err
	}
	s.hashedBytes.Add(int64(e.Size))
	e.Hash = out.hash
	dup, err := s.sameHash(e)
	if err != nil {
		return 0, err
	}
	if dup {
		return 0, errStreamFallback
	}
	if out.n > maxPayload {
		return 0, errStreamFallback
	}
	const flags = recFlagChunked | recFlagLateTable
	head := recordHead(recHeader{Flags: flags, ID: e.ID(), TextLen: e.Size}, int(out.n))
	end := start + recHeaderLen + out.n
	if _, err := f.WriteAt(append(head, out.table...), start); err != nil {
		return 0, fmt.Errorf("write record head: %w", err)
	}
	// The chunks are summed already; the header and table come last.
	d := out.sum
	d.Write(head)
	d.Write(out.table)
	trailer := binary.BigEndian.AppendUint64(nil, d.Sum64())
	if _, err := f.WriteAt(trailer, end); err != nil {
		return 0, fmt.Errorf("write record trailer: %w", err)
	}
	end += recTrailerLen
	e.Stored = uint32(end - start)
	e.ChainBytes = uint64(e.Stored)
	e.Flags = flags
	if out.fast > 0 {
		e.Flags |= index.FlagFastZstd
	}
	s.ratios[e.File] = float64(e.Stored) / float64(max(e.Size, 1))
	return end, nil
}

// sameHash reports whether a revision of e's size and hash exists: a
// dedup candidate, whose bytes only a put of the whole text compares.
func (s *Store) sameHash(e *index.Entry) (bool, error) {
	ids, err := s.byHash(e.Hash)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		if ce, err := s.entry(id); err == nil && ce.Size == e.Size && !ce.Lost() {
			return true, nil
		}
	}
	return false, nil
}

// ReadAll reads src from its start to its end in one buffer of about
// size bytes (a hint: src may have grown or shrunk).
func ReadAll(src io.ReaderAt, size int64) ([]byte, error) {
	buf := make([]byte, 0, max(size, 0)+1)
	for off := int64(0); ; {
		n, err := src.ReadAt(buf[len(buf):cap(buf)], off)
		buf, off = buf[:len(buf)+n], off+int64(n)
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}
