package mount

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// saveWindow: a file whose history began less than this before it was
// renamed over a file with a history is taken for the temp file of an
// atomic save that took its time (written, closed and renamed more than
// the recorder's newFileGrace apart: "cp f f.new; edit f.new; mv f.new
// f", a program that reopens its temp file to fsync it), and continues
// the replaced file's history as a quick save does. An older file renamed
// over another keeps its own history ("mv a b" carries a's to b), and the
// replaced one is a deleted file's.
const saveWindow = 5 * time.Minute

// renamedOver applies the rename of live file r.ID over r.Replaced to
// the id map: a file with no history yet, or a young one (saveWindow),
// continues the replaced file's history (transfer); a young one's newest
// content becomes that history's next revision (unless it is that
// history's newest content already), with its own newest revision as
// second parent (a dedup of it: no data is stored again).
//
// A replaced file that lives on under another hard link (the rename's
// ReplacedLivesAt) gets a history of its own there (forkMoved), also
// when the renamed file's change took the history before this event
// came (a quick save: the new file's change is queued first).
func (s *storeSink) renamedOver(ctx context.Context, r *fs.Rename) error {
	fid, ok := s.ids[r.Replaced]
	if !ok {
		if at := replacedLivesAt(r); at != "" {
			return s.forkMoved(ctx, r.Replaced, at)
		}
		return nil
	}
	own, hasOwn := s.ids[r.ID]
	if hasOwn && (own == fid || !s.youngerThan(own, s.saveWindow)) || r.Uid != r.ReplacedUid {
		// (Another owner's file does not take the replaced one's
		// history: a file's .history is its owner's to read. The
		// replaced one keeps it, also under another hard link.)
		return nil
	}
	if err := s.transfer(r.ID, r.Replaced, fid); err != nil {
		return err
	}
	// Durable now: the replaced file's identity leaves the live tree, and
	// its history would look like a deleted file's.
	if err := s.syncIDs(); err != nil {
		return err
	}
	var err error
	if hasOwn {
		err = s.carryOver(ctx, fid, own, r.To)
	}
	if at := replacedLivesAt(r); at != "" { // through another hard link
		err = errors.Join(err, s.forkMoved(ctx, r.Replaced, at))
	}
	return err
}

// replacedLivesAt is where the file a rename replaced lives on, for
// forkMoved: the other name the rename's directories hold, else
// elsewhere(r.To) if it has one in another directory, else "".
func replacedLivesAt(r *fs.Rename) string {
	if r.ReplacedElsewhere && r.ReplacedLivesAt == "" {
		return elsewhere(r.To)
	}
	return r.ReplacedLivesAt
}

// elsewhere is the livesAt (forkMoved, Event.LivesAt, vacate.to) of a
// file that left path and lives on under another hard link whose path
// the mount does not know (rsync --backup-dir's "ln doc old/doc", then a
// new doc): it forks at once, named by the path it left, rather than at
// its next change; until then it had no history of its own (verify
// reported it as never recorded, gc took the store for damaged). A NUL,
// which no path holds, marks it.
func elsewhere(path string) string { return "\x00" + path }

// youngerThan reports whether store file fid's first revision is less
// than d old.
func (s *storeSink) youngerThan(fid index.FileID, d time.Duration) bool {
	e, err := s.st.Entry(index.RevID{File: fid, Rev: 0})
	return err == nil && time.Since(time.Unix(0, e.Time)) < d
}

// carryOver records the newest revision of store file from as the next
// revision of fid, the history its live file now continues, unless it is
// fid's newest content already (a save that changed nothing).
func (s *storeSink) carryOver(ctx context.Context, fid, from index.FileID, path string) error {
	src := s.prev(from)
	if src.IsNull() {
		return nil
	}
	e, err := s.st.Entry(src)
	if err != nil {
		return fmt.Errorf("%s: continue the replaced file's history: %w", path, err)
	}
	data, err := s.st.Get(ctx, src)
	if err != nil {
		return fmt.Errorf("%s: continue the replaced file's history: %w", path, err)
	}
	p1 := s.prev(fid)
	ne, err := s.st.Put(ctx, objstore.PutRequest{File: fid, Data: data, P1: p1, P2: src,
		Hints: []index.RevID{src}, Time: s.notBefore(p1, time.Unix(0, e.Time)), Name: path, SkipSame: true})
	if err != nil {
		return fmt.Errorf("%s: continue the replaced file's history: %w", path, err)
	}
	s.last[fid] = ne.ID()
	if n, ok := s.known[from]; ok {
		s.known[fid] = n
	} else {
		delete(s.known, fid)
	}
	return nil
}

// forkMoved gives live file old, whose history a new file at the path it
// left continues (vacated.go), a history of its own if it still lives at
// rel, where it was renamed to (vim's f~ with 'backup' set, "mv f f.old;
// echo new > f"): a new store file whose first revision is old's content
// when it left, with the revision it forks from as second parent (a
// dedup of it, or a copy delta on it when that revision has no content
// hash: no data is stored again), so that "deltafs log" shows it and gc
// keeps it as a live file's. Gone (vim's f~ without 'backup'): nothing
// to do; an inode a descriptor keeps alive forks at its next change (see
// transfer).
func (s *storeSink) forkMoved(ctx context.Context, old fs.FileID, rel string) error {
	from, ok := s.forked[old]
	if !ok || from.IsNull() {
		return nil
	}
	if name, unknown := strings.CutPrefix(rel, elsewhere("")); unknown {
		rel = name // (see elsewhere)
	} else if id, err := readFileID(filepath.Join(s.live, filepath.FromSlash(rel))); err != nil || id != old {
		return nil // gone, or elsewhere: it forks at its next change
	}
	fail := func(err error) error { return fmt.Errorf("%s: fork the history it left: %w", rel, err) }
	e, err := s.st.Entry(from)
	if err != nil {
		return fail(err)
	}
	data, err := s.st.Get(ctx, from)
	if err != nil {
		return fail(err)
	}
	fids, err := s.st.NewFiles([]string{rel})
	if err != nil {
		return fail(err)
	}
	if err := s.bind(old, fids[0]); err != nil {
		return fail(err)
	}
	if err := s.syncIDs(); err != nil { // the mapping before the revision
		return err
	}
	delete(s.forked, old)
	ne, err := s.st.Put(ctx, objstore.PutRequest{File: fids[0], Data: data, P2: from, Hints: []index.RevID{from}, Time: time.Unix(0, e.Time)})
	if err != nil {
		return fail(err)
	}
	s.last[fids[0]] = ne.ID()
	return nil
}
