package objstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/deltafs/deltafs/index"
)

// recPos is where an entry says its record is.
type recPos struct {
	id     index.RevID
	seg    uint32
	off    uint64
	stored uint32
}

// segments checks index/segment agreement from the segments' side: it
// walks every committed byte of every segment (up to tail, read before
// the entries) in record steps. A record an entry points at is skipped
// here (verifyOne read and checked it); anything else is a problem: a
// whole record no entry points at (its header says whose it is), bytes
// that are no record, or two entries sharing or overlapping one record.
// Only unaccounted bytes are read.
func (v *verifier) segments(ctx context.Context, tail index.Tail) error {
	slices.SortFunc(v.recs, func(a, b recPos) int {
		if a.seg != b.seg {
			return int(a.seg) - int(b.seg)
		}
		switch {
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	ns, err := listSegments(v.s.segs.dir)
	if err != nil {
		return err
	}
	ns = slices.DeleteFunc(ns, func(n uint32) bool { return n > tail.Seg || n == tail.Seg && tail.End == 0 })
	v.sum.Segments = int64(len(ns))
	recs := v.recs
	for i, n := range ns {
		if err := ctx.Err(); err != nil {
			return err
		}
		for len(recs) > 0 && recs[0].seg < n {
			recs = recs[1:] // in a missing segment: verifyOne reported it
		}
		j := 0
		for j < len(recs) && recs[j].seg == n {
			j++
		}
		end, err := v.segmentEnd(n, tail)
		if err != nil {
			return err
		}
		v.walkSegment(n, end, recs[:j])
		recs = recs[j:]
		v.progress(VerifyProgress{Phase: "segments", Done: int64(i + 1), Total: int64(len(ns))})
	}
	return nil
}

// segmentEnd is how far segment n is committed: its size, or the tail in
// the tail's segment.
func (v *verifier) segmentEnd(n uint32, tail index.Tail) (uint64, error) {
	fi, err := os.Stat(filepath.Join(v.s.segs.dir, segName(n)))
	if err != nil {
		return 0, fmt.Errorf("objstore: verify: %w", err)
	}
	end := uint64(fi.Size())
	if n == tail.Seg {
		end = min(end, tail.End)
	}
	return end, nil
}

// walkSegment walks segment n up to end; recs are its entries' records,
// by offset.
func (v *verifier) walkSegment(n uint32, end uint64, recs []recPos) {
	at := func(off uint64) string { return fmt.Sprintf("segment %d at %d", n, off) }
	pos := uint64(0)
	var prev recPos
	for pos < end {
		if len(recs) > 0 && recs[0].off < pos {
			r := recs[0]
			v.problem(Problem{Kind: ProblemIndex, Rev: r.id, Path: at(r.off),
				Err: fmt.Errorf("entry's record overlaps the record of %v (at %d, %d bytes)", prev.id, prev.off, prev.stored)})
			recs = recs[1:]
			continue
		}
		if len(recs) > 0 && recs[0].off == pos {
			prev = recs[0]
			pos += uint64(recs[0].stored)
			recs = recs[1:]
			continue
		}
		next := end
		if len(recs) > 0 {
			next = min(next, recs[0].off)
		}
		pos = v.stray(n, pos, next)
	}
}

// stray looks at the unaccounted bytes of segment n from pos (up to the
// next entry's record at next) and reports them: as a record no entry
// points at when one is there, else as bytes that are no record. It
// returns where the walk goes on.
func (v *verifier) stray(n uint32, pos, next uint64) uint64 {
	at := fmt.Sprintf("segment %d at %d", n, pos)
	hdr, err := v.s.segs.readAt(n, pos, int(min(recHeaderLen, next-pos)))
	if err == nil {
		var h recHeader
		if h, err = parseHeader(hdr); err == nil {
			size := uint64(recOverhead) + uint64(h.PayloadLen)
			if pos+size <= next {
				raw, rerr := v.s.segs.readAt(n, pos, int(size))
				if rerr == nil {
					if _, _, derr := decodeRecord(raw); derr == nil {
						v.problem(Problem{Kind: ProblemSegment, Rev: h.ID, Path: at,
							Err: fmt.Errorf("record of %d bytes that no index entry points at", size)})
						return pos + size
					}
				}
			}
		}
	}
	v.problem(Problem{Kind: ProblemSegment, Path: at,
		Err: fmt.Errorf("%d bytes that are no record an index entry points at", next-pos)})
	return next
}
