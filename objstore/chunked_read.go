package objstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/index"
)

// readGroup is how many chunks a read of a chunked fulltext holds at
// once: the stored bytes of one chunk per decoding worker.
const readGroup = maxChunkWorkers

// readChunked reads and checks e's chunked record a group of chunks at a
// time, decoding each group into its place in the text: a read holds the
// text and a few chunks' stored bytes, not the whole record as well (a
// 1 GiB text of M1 stores ~430 MB). The record's checksum is summed as
// the groups go and checked before the text is returned.
func (s *Store) readChunked(want index.RevID, e *index.Entry) ([]byte, error) {
	text := s.getBuf(e.Size)[:e.Size]
	into := func(off, n uint64) []byte { return text[off : off+n] }
	if err := s.walkChunked(want, e, into, nil); err != nil {
		s.putBuf(text)
		return nil, err
	}
	return text, nil
}

// walkChunked reads and checks e's chunked record a group of chunks at a
// time (readChunked): each group's text, of n bytes from text offset
// off, is decoded into into(off, n) (nil: one buffer of the walk's own,
// reused from group to group) and then handed to got, if not nil.
// The record's checksum is checked at the end: what got saw is e's text
// only if walkChunked returns nil. An error got returns ends the walk.
func (s *Store) walkChunked(want index.RevID, e *index.Entry, into func(off, n uint64) []byte, got func(off uint64, text []byte) error) error {
	if err := lostCheck(want, e); err != nil {
		return err
	}
	if into == nil {
		var buf []byte
		into = func(_, n uint64) []byte {
			if uint64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			return buf[:n]
		}
	}
	if e.Stored < recOverhead+chunkHeaderLen || e.Stored > recOverhead+maxPayload {
		return corrupt(want, e, fmt.Errorf("index gives a record of %d bytes", e.Stored))
	}
	s.readRecords.Add(1)
	s.readBytes.Add(int64(e.Stored))
	payloadLen := uint64(e.Stored) - recOverhead
	head, err := s.readPart(want, e, 0, recHeaderLen+chunkHeaderLen)
	if err != nil {
		return err
	}
	h, err := parseHeader(head)
	if err == nil && uint64(h.PayloadLen) != payloadLen {
		err = fmt.Errorf("%w: payload of %d bytes, index says %d", errRecord, h.PayloadLen, payloadLen)
	}
	if err == nil {
		err = agree(&h, e)
	}
	if err != nil {
		return corrupt(want, e, err)
	}
	tl, err := chunkTableLen(head[recHeaderLen:], payloadLen)
	if err != nil {
		return corrupt(want, e, err)
	}
	table, err := s.readPart(want, e, recHeaderLen, tl)
	if err != nil {
		return err
	}
	spans, err := parseChunkTable(table, payloadLen, e.Size)
	if err != nil {
		return corrupt(want, e, err)
	}
	// The checksum sums header and table first, or, in a record whose
	// table was written last, after the chunks (record.go).
	sum := xxhash.New()
	if !h.lateTable() {
		sum.Write(head[:recHeaderLen])
		sum.Write(table)
	}
	if err := s.readSpans(want, e, spans, sum, into, got); err != nil {
		return err
	}
	if h.lateTable() {
		sum.Write(head[:recHeaderLen])
		sum.Write(table)
	}
	trailer, err := s.readPart(want, e, recHeaderLen+payloadLen, recTrailerLen)
	if err == nil && binary.BigEndian.Uint64(trailer) != sum.Sum64() {
		err = corrupt(want, e, fmt.Errorf("%w: checksum mismatch", errRecord))
	}
	return err
}

// readSpans reads the chunks' stored bytes readGroup chunks at a time,
// adds them to sum and decodes them into text. The groups take turns in
// one buffer: a buffer per group was as many bytes of garbage as the
// record stores, and a read of a 96 MiB incompressible text peaked at
// twice its size on the heap (TestOldRevisionReadMemory).
func (s *Store) readSpans(want index.RevID, e *index.Entry, spans []chunkSpan, sum *xxhash.Digest, into func(off, n uint64) []byte, got func(off uint64, text []byte) error) error {
	var buf []byte
	defer func() { s.putBuf(buf) }()
	for len(spans) > 0 {
		g := spans[:min(readGroup, len(spans))]
		spans = spans[len(g):]
		last := g[len(g)-1]
		n := last.at + last.n - g[0].at
		if uint64(cap(buf)) < n {
			s.putBuf(buf)
			buf = s.getBuf(n)
		}
		b := buf[:n]
		if err := s.readPartInto(want, e, recHeaderLen+g[0].at, b); err != nil {
			return err
		}
		sum.Write(b)
		off := uint64(g[0].textOff)
		tn := uint64(last.textOff+last.textN) - off
		for i := range g {
			g[i].stored = b[g[i].at-g[0].at : g[i].at-g[0].at+g[i].n]
			g[i].textOff -= int(off) // into the group's text
		}
		text := into(off, tn)
		if err := decodeSpans(text, g, s.dec); err != nil {
			return corrupt(want, e, fmt.Errorf("chunks from text offset %d: %w", off, err))
		}
		if got != nil {
			if err := got(off, text); err != nil {
				return err
			}
		}
	}
	return nil
}

// readPartInto fills b from e's record at offset off in it.
func (s *Store) readPartInto(want index.RevID, e *index.Entry, off uint64, b []byte) error {
	err := s.segs.readInto(e.Seg, e.Off+off, b)
	if errors.Is(err, errShort) {
		return corrupt(want, e, err)
	}
	if err != nil {
		return fmt.Errorf("objstore: read %v for %v: %w", e.ID(), want, err)
	}
	return nil
}

// readPart reads n bytes of e's record from offset off in it.
func (s *Store) readPart(want index.RevID, e *index.Entry, off, n uint64) ([]byte, error) {
	b, err := s.segs.readAt(e.Seg, e.Off+off, int(n))
	if errors.Is(err, errShort) {
		return nil, corrupt(want, e, err)
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: read %v for %v: %w", e.ID(), want, err)
	}
	return b, nil
}
