package objstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/deltafs/deltafs/index"
)

// Segments kept whole. A live segment whose every byte is the record of a
// revision the plan calls stable (repack_plan.go) is not copied: its
// revisions go into the shadow with their entries as they are (same
// segment, same offset), and before SWITCH the file is hard-linked into
// repack/segments/ under the same number. The swap then finds it there;
// removing segments.old/ drops the old name only. New records go to
// segments numbered above every live one, so no number means two files.
//
// Crash safety is the shadow's: until SWITCH the live store is untouched
// (a link adds a name, never changes the file, and a segment is never
// written below the tail), and Open's recovery leaves segments below the
// shadow's tail alone, links included. The kept set and the first new
// number are part of the shadow's options: a resumed run that would keep
// other segments (the store was written to in between) starts over.
//
// A repack leaves the store's tail at the start of a segment that does
// not exist yet (freshTail), so that what is written after it goes to
// segments of its own, and the next repack can keep every segment this
// one wrote whole: with 256 MiB segments most stores are a single one.
// The cost is a segment file more per repack that changes something.
//
// At the switch an entry the shadow holds as it is in the live index is
// not written again (copyShadow), nor is a file record that did not
// change: a store that changed in one segment costs its index rows, not
// every one.

// keptOptions is the part of the shadow's options that says which
// segments are kept and where new ones start.
func keptOptions(dir string, kept map[uint32]bool) (string, uint32, error) {
	if len(kept) == 0 {
		return "", 0, nil
	}
	ns, err := listSegments(filepath.Join(dir, segmentsName))
	if err != nil {
		return "", 0, err
	}
	from := uint32(1)
	if len(ns) > 0 {
		from = ns[len(ns)-1] + 1
	}
	ks := make([]uint32, 0, len(kept))
	for n := range kept {
		ks = append(ks, n)
	}
	slices.Sort(ks)
	var b strings.Builder
	fmt.Fprintf(&b, "new-segments-from %d\nkept-segments", from)
	for _, n := range ks {
		fmt.Fprintf(&b, " %d", n)
	}
	b.WriteString("\n")
	return b.String(), from, nil
}

// startSegmentsAt makes a fresh shadow append its first record at segment
// from, committing that tail.
func startSegmentsAt(s *Store, from uint32) error {
	if from == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.segs.cur, s.segs.curSize = from, 0
	return s.idx.Commit(&index.Batch{Tail: s.segs.tail()})
}

// freshTail moves s's committed tail to the start of the next segment
// number, unless it is at the start of one already. Nothing is written
// past the tail, so this only says where the next record goes.
func freshTail(s *Store) error {
	s.wmu.Lock()
	t := s.segs.tail()
	s.wmu.Unlock()
	if t.End == 0 {
		return nil
	}
	return startSegmentsAt(s, t.Seg+1)
}

// linkKept hard-links every kept segment of the live store in dir into
// the shadow's segment directory, under the same number. Repeatable.
func linkKept(dir string, kept map[uint32]bool) error {
	if len(kept) == 0 {
		return nil
	}
	sdir := filepath.Join(dir, shadowName, segmentsName)
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return fmt.Errorf("objstore: repack: %w", err)
	}
	for n := range kept {
		src, dst := filepath.Join(dir, segmentsName, segName(n)), filepath.Join(sdir, segName(n))
		if err := linkOne(src, dst); err != nil {
			return fmt.Errorf("objstore: repack: keep segment %d: %w", n, err)
		}
	}
	return index.SyncDir(sdir)
}

func linkOne(src, dst string) error {
	if dfi, err := os.Lstat(dst); err == nil {
		sfi, err := os.Lstat(src)
		if err != nil {
			return err
		}
		if os.SameFile(sfi, dfi) {
			return nil
		}
		if err := os.Remove(dst); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Link(src, dst); err == nil || errors.Is(err, os.ErrNotExist) {
		return err
	}
	// A file system without hard links: the same bytes at the same
	// offsets serve as well, at the cost of the copy.
	return copySegment(src, dst)
}

// copySegment copies src to dst durably (through a temporary name).
func copySegment(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
