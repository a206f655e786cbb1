package objstore

import (
	"context"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/index"
)

// WriteText writes the text of revision id to w from offset 0, when the
// revision is a chunked fulltext (or a dedup of one; not a raw or
// single-stream fulltext, nor a delta): a group of chunks
// at a time, so that a big text is copied out in a few MiB of memory
// instead of rebuilt whole (Get). ok is false, with nothing written,
// for any other revision: the caller then uses Get. The record's
// checksum and the text's hash are checked after the last chunk; w
// holds the text only when err is nil.
func (s *Store) WriteText(ctx context.Context, id index.RevID, w io.WriterAt) (ok bool, err error) {
	e, err := s.entry(id)
	if err != nil {
		return false, fmt.Errorf("objstore: get %v: %w", id, err)
	}
	if e, err = s.dataEntry(id, e); err != nil {
		return false, err
	}
	if e.Kind != index.KindFull || e.Flags&index.FlagChunked == 0 || e.Flags&index.FlagDelta != 0 || !s.cfg.xxhash {
		return false, nil // (a hash set by a test is checked by Get's path)
	}
	sum := xxhash.New()
	got := func(off uint64, text []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		sum.Write(text) // the groups come in text order
		_, err := w.WriteAt(text, int64(off))
		return err
	}
	if err := s.walkChunked(id, &e, nil, got); err != nil {
		return true, err
	}
	s.hashedBytes.Add(int64(e.Size))
	if e.Flags&index.FlagHashDeferred == 0 && sum.Sum64() != e.Hash {
		return true, corrupt(id, &e, fmt.Errorf("content hash mismatch"))
	}
	return true, nil
}
