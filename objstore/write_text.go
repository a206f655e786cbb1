package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// WriteText writes the text of revision id to w from offset 0, without
// holding it whole in memory, when it can: a chunked fulltext (or a
// dedup of one) is copied a group of chunks at a time; a delta on such
// a fulltext, when w is a TextFile, is rebuilt in w itself
// (writeDeltaText). ok is false, with w to be discarded, for any other
// revision (a raw or single-stream fulltext, a delta on one, a zstd or
// two-base delta): the caller then uses Get. The records' checksums and
// the text's hash are checked; w holds the text only when err is nil.
func (s *Store) WriteText(ctx context.Context, id index.RevID, w io.WriterAt) (ok bool, err error) {
	gen := s.takenBack.Load() // before the entry: see learnedHashes
	e, err := s.entry(id)
	if err != nil {
		return false, fmt.Errorf("objstore: get %v: %w", id, err)
	}
	if e, err = s.dataEntry(id, e); err != nil {
		return false, err
	}
	if !s.cfg.xxhash {
		return false, nil // (a hash set by a test is checked by Get's path)
	}
	if f, isFile := w.(TextFile); isFile && e.Kind != index.KindFull {
		return s.writeDeltaText(ctx, id, e, f, gen)
	}
	if !chunkedFull(&e) {
		return false, nil
	}
	return true, s.writeChunked(ctx, id, &e, w)
}

// chunkedFull reports whether e's record is a chunked fulltext.
func chunkedFull(e *index.Entry) bool {
	return e.Kind == index.KindFull && e.Flags&index.FlagChunked != 0 && e.Flags&index.FlagDelta == 0
}

// writeChunked copies chunked fulltext e (of revision want) to w a group
// of chunks at a time, and checks its hash.
func (s *Store) writeChunked(ctx context.Context, want index.RevID, e *index.Entry, w io.WriterAt) error {
	sum := xxhash.New()
	got := func(off uint64, text []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		sum.Write(text) // the groups come in text order
		_, err := w.WriteAt(text, int64(off))
		return err
	}
	if err := s.walkChunked(want, e, nil, got); err != nil {
		return err
	}
	s.hashedBytes.Add(int64(e.Size))
	if e.Flags&index.FlagHashDeferred == 0 && sum.Sum64() != e.Hash {
		return corrupt(want, e, fmt.Errorf("content hash mismatch"))
	}
	return nil
}

// inPlaceGrowth bounds how much longer than the revision's text a chain
// rebuilt in its file may make it on the way (writeDeltaText); a
// variable for tests.
var inPlaceGrowth uint64 = 512 << 20

// TextFile is where WriteText can rebuild a delta revision: a file it
// reads back, writes over and cuts to length (an *os.File is one).
type TextFile interface {
	delta.ReadWriterAt
	Truncate(size int64) error
}

// writeDeltaText rebuilds delta revision e (of revision want) in f: its
// chain's fulltext, when chunked, is copied in, and each delta of the
// chain, read one at a time, is applied over it in place
// (delta.ApplyInPlaceAt), which takes the deltas of in-place writes,
// appends, truncations and deletions (the mount's changes of a big
// file), writing only the bytes they insert. It holds a group of chunks
// and one delta at a time, where Get held the whole text (and for a
// delta that inserts, two). ok is false, with f part written, when a
// record of the chain is none of those.
//
// gen is the store's count of take-backs before e was read: a hash of a
// deferred-hash revision is learned only if no take-back came since.
func (s *Store) writeDeltaText(ctx context.Context, want index.RevID, e index.Entry, f TextFile, gen uint64) (bool, error) {
	chain, _, err := s.chain(want, e, caches{})
	if errors.Is(err, errGraph) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	root := &chain[len(chain)-1]
	if !chunkedFull(root) {
		return false, nil
	}
	// Nothing is written before every delta is known to apply in place,
	// with the lengths the chain gives, and the file never to grow more
	// than inPlaceGrowth past the text: the spilled file's file system
	// was checked for room for the text and some slack, not for a root
	// many times larger (a big file truncated since). The deltas are read
	// again to be applied: they are small, and held one at a time.
	most := root.Size
	for i := len(chain) - 2; i >= 0; i-- {
		d, err := s.readRecord(want, &chain[i])
		if err != nil {
			return true, err
		}
		bl, tl, ok, err := delta.InPlace(d)
		if err == nil && (bl != chain[i+1].Size || tl != chain[i].Size) {
			err = fmt.Errorf("delta from %d to %d bytes, index says %d to %d", bl, tl, chain[i+1].Size, chain[i].Size)
		}
		if err != nil {
			return true, corrupt(want, &chain[i], err)
		}
		if !ok {
			return false, nil
		}
		most = max(most, chain[i].Size)
	}
	if most > e.Size+inPlaceGrowth {
		return false, nil
	}
	if err := s.writeChunked(ctx, want, root, f); err != nil {
		return true, err
	}
	n := int64(root.Size)
	for i := len(chain) - 2; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return true, err
		}
		d, err := s.readRecord(want, &chain[i])
		if err != nil {
			return true, err
		}
		next, ok, err := delta.ApplyInPlaceAt(f, n, d)
		if errors.Is(err, delta.ErrCorrupt) || errors.Is(err, delta.ErrBaseMismatch) {
			return true, corrupt(want, &chain[i], err)
		}
		if err != nil || !ok {
			return ok, err
		}
		if uint64(next) != chain[i].Size {
			return true, corrupt(want, &chain[i], fmt.Errorf("delta gave %d bytes, index says %d", next, chain[i].Size))
		}
		n = next
	}
	if err := f.Truncate(n); err != nil {
		return true, err
	}
	sum := xxhash.New()
	if _, err := io.Copy(sum, io.NewSectionReader(f, 0, n)); err != nil {
		return true, err
	}
	s.hashedBytes.Add(n)
	if e.Flags&index.FlagHashDeferred != 0 {
		// The records' checksums vouch for it, as for Get; its hash,
		// now known, lets a restore of it be a dedup (PutSame).
		s.hashes.learn(e.ID(), e.Size, sum.Sum64(), func() bool { return s.takenBack.Load() == gen })
		return true, nil
	}
	if sum.Sum64() != e.Hash {
		return true, corrupt(want, &e, errors.New("content hash mismatch"))
	}
	return true, nil
}
