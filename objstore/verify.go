package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/spill"
)

// ProblemKind says what part of the store a Problem is in.
type ProblemKind string

// The kinds of problem Verify reports.
const (
	ProblemRevision ProblemKind = "revision" // a revision's record, chain or content does not read back
	ProblemIndex    ProblemKind = "index"    // an index row that does not decode or disagrees with another
	ProblemSegment  ProblemKind = "segment"  // segment bytes that no index entry accounts for
	ProblemTree     ProblemKind = "tree"     // a snapshot's directory tree, or a revision it names
	ProblemRefs     ProblemKind = "refs"     // a snapshot's reference set disagrees with its tree
	ProblemLive     ProblemKind = "live"     // a live file and its last revision disagree (package mount)
)

// Problem is one thing Verify found wrong: what, which revision (null if
// none) and where else (a snapshot path, a segment offset).
type Problem struct {
	Kind ProblemKind
	Rev  index.RevID
	Path string
	Err  error
}

func (p Problem) String() string {
	switch {
	case p.Path == "":
		return fmt.Sprintf("%v: %v", p.Rev, p.Err)
	case p.Rev.IsNull():
		return fmt.Sprintf("%s: %v", p.Path, p.Err)
	}
	return fmt.Sprintf("%s (revision %v): %v", p.Path, p.Rev, p.Err)
}

// VerifyProgress is what VerifyAll reports as it goes: the phase
// ("revisions", "segments", "snapshots") and how far it is.
type VerifyProgress struct {
	Phase       string
	Done, Total int64
}

// VerifySummary counts what VerifyAll checked and found.
type VerifySummary struct {
	Revisions, Files, Segments, Snapshots, Trees int64
	Problems                                     int
	// Unhashed counts revisions stored from a delta alone: they have no
	// content hash to compare, and are checked by their chain's record
	// checksums and rebuild only.
	Unhashed int64
	// Lost counts revisions a salvage kept as lost (index.FlagLost): known
	// gone, not problems; a snapshot or a live file may name one.
	Lost int64
}

// verifyCacheBytes bounds the texts Verify keeps to rebuild neighbours; it
// uses its own cache so that it only trusts texts it has itself checked.
const verifyCacheBytes = 64 << 20

// Verify checks the whole store (see VerifyAll), calling report for every
// problem, and returns how many it found; the error is for failures of
// the walk itself (e.g. ctx).
func (s *Store) Verify(ctx context.Context, report func(Problem)) (int, error) {
	sum, err := s.VerifyAll(ctx, report, nil)
	return sum.Problems, err
}

// VerifyAll checks, and calls report for every problem found:
//
//   - every revision: its index row decodes and agrees with its key and
//     its file's row; its record (checksum, agreement with the index,
//     within the committed tail); the rebuild of its whole chain and its
//     content hash;
//   - index/segment agreement the other way (verify_segments.go): every
//     committed segment byte belongs to a record some entry points at, and
//     no two entries share or overlap a record;
//   - every snapshot (verify_snapshots.go): each tree is there, decodes
//     and hashes to its name; each file entry names a revision that exists,
//     reads back and has the entry's size; the snapshot's reference set is
//     exactly the revisions its tree names.
//
// It reads through the store's normal paths and may run beside writers
// (the mount's control socket does): what was committed when it started
// is checked. progress, if not nil, is called as it goes.
func (s *Store) VerifyAll(ctx context.Context, report func(Problem), progress func(VerifyProgress)) (VerifySummary, error) {
	v := &verifier{s: s, report: report, progress: progress, bad: index.NewRefs()}
	if progress == nil {
		v.progress = func(VerifyProgress) {}
	}
	err := v.run(ctx)
	if d := s.Damage(); d != nil && err == nil {
		// The mark of damage an open found (damage.go) goes once the
		// store verifies clean (its segment put back); else it is one
		// more line, saying where the lost revisions went.
		switch {
		case v.sum.Problems > 0:
			v.problem(Problem{Kind: ProblemSegment, Path: "segments", Err: d})
		case s.cfg.ReadOnly:
			s.log.Warn("the store verifies clean, but holds the mark of damage an earlier open found (STORE/"+damageFile+"): a verify of the store opened for writing removes it", "damage", d)
		default:
			if cerr := s.clearDamage(); cerr != nil {
				return v.sum, cerr
			}
			s.log.Info("the store verifies clean: the mark of damage an earlier open found is removed", "damage", d)
		}
	}
	if v.sum.Unhashed > 0 {
		s.log.Info("revisions stored from a delta alone have no content hash to compare: checked by their chain's record checksums and rebuild only",
			"revisions", v.sum.Unhashed)
	}
	return v.sum, err
}

// verifier is one run of VerifyAll.
type verifier struct {
	s        *Store
	report   func(Problem)
	progress func(VerifyProgress)
	sum      VerifySummary
	bad      *index.Refs             // revisions that did not read back
	recs     []recPos                // where the entries say records are
	perFile  map[index.FileID]uint32 // highest revision number + 1
}

func (v *verifier) problem(p Problem) {
	v.sum.Problems++
	v.report(p)
}

func (v *verifier) run(ctx context.Context) error {
	// The tail before the entries bounds the segment walk: every record
	// before it has its entry among those read next.
	walkTail, err := v.s.idx.Tail()
	if err != nil {
		return err
	}
	ids, err := v.entries(ctx)
	if err != nil {
		return err
	}
	if err := v.files(ctx); err != nil {
		return err
	}
	if err := v.revisions(ctx, ids); err != nil {
		return err
	}
	if err := v.segments(ctx, walkTail); err != nil {
		return err
	}
	return v.snapshots(ctx)
}

// entries reads every revision row, reporting those that do not decode.
func (v *verifier) entries(ctx context.Context) ([]index.RevID, error) {
	var ids []index.RevID
	v.perFile = map[index.FileID]uint32{}
	err := v.s.idx.EachEntry(ctx, func(id index.RevID, e index.Entry, err error) error {
		if err != nil {
			v.problem(Problem{Kind: ProblemIndex, Rev: id, Err: err})
			return nil
		}
		ids = append(ids, id)
		v.perFile[id.File] = max(v.perFile[id.File], uint32(id.Rev)+1)
		if e.Flags&index.FlagHashDeferred != 0 {
			v.sum.Unhashed++
		}
		if e.Lost() {
			v.sum.Lost++
			return nil // no record
		}
		if e.Kind != index.KindDedup {
			v.recs = append(v.recs, recPos{id: id, seg: e.Seg, off: e.Off, stored: e.Stored})
		}
		return nil
	})
	v.sum.Revisions = int64(len(ids))
	return ids, err
}

// files checks every file row against the revisions found: no entry of
// a file may be numbered at or past its record's revision count (gc
// leaves gaps below it, so the count itself may be larger). Rows are read
// after the entries and counts only grow, so a file recorded to meanwhile
// (verify through a mount) passes too.
func (v *verifier) files(ctx context.Context) error {
	seen := map[index.FileID]bool{}
	err := v.s.idx.EachFile(ctx, func(f index.FileID, m index.FileMeta, err error) error {
		v.sum.Files++
		seen[f] = true
		switch {
		case err != nil:
			v.problem(Problem{Kind: ProblemIndex, Path: fmt.Sprintf("file %d", f), Err: err})
		case v.perFile[f] > m.Revs:
			v.problem(Problem{Kind: ProblemIndex, Rev: index.RevID{File: f, Rev: index.Rev(v.perFile[f] - 1)},
				Path: fmt.Sprintf("file %d (%s)", f, m.Name),
				Err:  fmt.Errorf("revision %d in the index, the file record counts %d", v.perFile[f]-1, m.Revs)})
		}
		return nil
	})
	for f := range v.perFile {
		if !seen[f] {
			v.problem(Problem{Kind: ProblemIndex, Rev: index.RevID{File: f}, Path: fmt.Sprintf("file %d", f),
				Err: errors.New("revisions of a file with no file record")})
		}
	}
	return err
}

func (v *verifier) isBad(id index.RevID) bool {
	k, err := index.RefKey(id)
	return err == nil && v.bad.Contains(k)
}

// revisions reads every revision back.
func (v *verifier) revisions(ctx context.Context, ids []index.RevID) error {
	tail, err := v.s.idx.Tail() // read after the entries: covers all of them
	if err != nil {
		return err
	}
	cache := caches{full: newLRU[index.RevID](verifyCacheBytes)}
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := v.s.verifyOne(ctx, id, tail, cache); err != nil {
			if k, kerr := index.RefKey(id); kerr == nil {
				v.bad.Add(k)
			}
			v.problem(Problem{Kind: ProblemRevision, Rev: id, Err: err})
		}
		v.progress(VerifyProgress{Phase: "revisions", Done: int64(i + 1), Total: int64(len(ids))})
	}
	return nil
}

func (s *Store) verifyOne(ctx context.Context, id index.RevID, tail index.Tail, c caches) error {
	e, err := s.idx.Entry(id)
	if err != nil || e.Lost() {
		return err // a lost revision has nothing to read
	}
	big := e.Size >= bigFull
	if e.Kind != index.KindDedup {
		if e.Seg > tail.Seg || e.Seg == tail.Seg && e.Off+uint64(e.Stored) > tail.End {
			return corrupt(id, &e, fmt.Errorf("record beyond the committed tail %d:%d", tail.Seg, tail.End))
		}
		// A big chunked fulltext's record is summed as WriteText reads
		// it below, a group of chunks at a time (walkChunked), not read
		// whole here.
		if !big || !chunkedFull(&e) {
			if _, err := s.readRecord(id, &e); err != nil {
				return err
			}
		}
	}
	if e.Kind == index.KindP1P2 {
		if err := s.verifyGraphFacts(e); err != nil {
			return err
		}
	}
	if big {
		// Rebuilt into a file where the store can (WriteText checks the
		// records' checksums and the text's hash as rebuild does): a
		// verify of a store with a 512 MiB file peaked at 1.6 GB,
		// holding a revision, its base and the base's record.
		f, err := spill.Text(ctx, s.dir, e.Size, func(ctx context.Context, w io.WriterAt) (bool, error) {
			return s.WriteText(ctx, id, w)
		})
		if err != nil || f != nil {
			if f != nil {
				f.Close()
			}
			return err
		}
	}
	// Its own cache only: the store's may hold texts Verify has not checked.
	_, err = s.rebuild(ctx, id, e, c)
	return err
}

// verifyGraphFacts checks a two-base record's chain facts against its
// record graph (each distinct record once, graph.go): the caps were
// applied to them, and gc and repack keep them.
func (s *Store) verifyGraphFacts(e index.Entry) error {
	g, err := s.walkGraph(e.ID(), e, caches{}, int(e.ChainLen))
	if err != nil {
		return err
	}
	if uint64(g.deltas) != uint64(e.ChainLen) || g.bytes != e.ChainBytes {
		return corrupt(e.ID(), &e, fmt.Errorf("chain facts %d deltas, %d bytes; its record graph has %d, %d",
			e.ChainLen, e.ChainBytes, g.deltas, g.bytes))
	}
	return nil
}
