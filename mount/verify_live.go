package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// LiveSummary counts what the live-file check looked at.
type LiveSummary struct {
	Files    int64 // regular live files compared with their last revision
	Pending  int64 // files whose change is not recorded yet: open for writing, or left to the next mount (pending journal)
	Skipped  int64 // files larger than a revision may be: never recorded
	Problems int
}

// liveCheck compares every live file with its file's last recorded
// revision: they must be equal, unless a change is pending (the file is
// open for writing in a running mount). It reads the live directory and
// the store only.
type liveCheck struct {
	st   *objstore.Store
	live string // STORE/live
	// storeFile maps a live FileID to its store file.
	storeFile func(fs.FileID) (index.FileID, bool)
	// writing, if set, returns the live inode numbers open for writing.
	writing func() map[uint64]bool
	// journaled holds the files the pending journal names (offline: a
	// mount stopped before recording them; the next mount redoes them).
	journaled map[fs.FileID]bool
	// unclean (offline): the store holds the mark of a mount that did
	// not end cleanly, and the next mount checks every live file and
	// records those that differ (unclean.go): a difference it will see
	// is pending. restarted: the mark is another boot's, and that check
	// will read every file; else it sees a file changed by its stat.
	unclean, restarted bool
	// leftOut, if set, reports whether the live file at p (FileID id)
	// is one a running mount leaves out of history and keeps pending
	// (exclude.go).
	leftOut func(p string, id fs.FileID) bool
	// settle, if set, waits until every change reported so far is
	// recorded; a file that disagrees is checked again after it, since
	// its change may have been reported while the check ran.
	settle func(ctx context.Context) error
	report func(objstore.Problem)
	sum    LiveSummary
}

// run walks the live directory.
func (c *liveCheck) run(ctx context.Context) (LiveSummary, error) {
	err := filepath.WalkDir(c.live, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(c.live, p)
		c.file(ctx, p, rel)
		return nil
	})
	if err != nil {
		return c.sum, fmt.Errorf("live files: %w", err)
	}
	return c.sum, nil
}

// file checks one live file, twice if it disagrees and a change may have
// been reported meanwhile.
func (c *liveCheck) file(ctx context.Context, p, rel string) {
	rev, pending, err := c.check(ctx, p)
	if err != nil && !pending && c.settle != nil {
		if serr := c.settle(ctx); serr == nil {
			rev, pending, err = c.check(ctx, p)
		}
	}
	if !errors.Is(err, errTooLarge) {
		c.sum.Files++
	}
	switch {
	case pending:
		c.sum.Pending++
	case errors.Is(err, errTooLarge):
		c.sum.Skipped++
	case err != nil:
		c.sum.Problems++
		c.report(objstore.Problem{Kind: objstore.ProblemLive, Rev: rev, Path: "live " + rel, Err: err})
	}
}

// errTooLarge: the file is larger than a revision may be (never recorded).
var errTooLarge = errors.New("too large to record")

// check compares the live file at p with its last revision; pending says
// a disagreement is a change not recorded yet.
func (c *liveCheck) check(ctx context.Context, p string) (index.RevID, bool, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return index.NullRev, false, err
	}
	if st.Size > maxRecordBytes {
		return index.NullRev, false, errTooLarge
	}
	var id fs.FileID
	if n, err := unix.Lgetxattr(p, fs.XattrID, id[:]); err != nil || n != len(id) {
		id = fs.FileID{}
	}
	var newest index.Entry
	fid, ok := c.storeFile(id)
	if ok && !id.IsZero() {
		var err error // not revision Revs-1: gc leaves gaps
		if newest, ok, err = c.st.Latest(fid); err != nil {
			return index.RevID{File: fid}, false, fmt.Errorf("its store file: %w", err)
		}
	}
	if !ok || id.IsZero() {
		if st.Size == 0 {
			return index.NullRev, false, nil
		}
		return index.NullRev, c.unclean || c.pending(p, st.Ino, id), fmt.Errorf("%d bytes never recorded: the file has no revision", st.Size)
	}
	last := newest.ID()
	same := st.Size == int64(newest.Size)
	if same {
		// A big revision is read from a spilled file (readText), never
		// whole: a verify of a 512 MiB file held it here too.
		want, err := readText(ctx, c.st, last, newest.Size)
		if errors.Is(err, objstore.ErrLost) {
			return last, false, fmt.Errorf("its last revision was lost to damage: the next snapshot records the live content again")
		}
		if err != nil {
			return last, false, fmt.Errorf("its last revision does not read back: %w", err)
		}
		same, err = c.sameContent(p, st.Ino, want)
		want.Close()
		if err != nil {
			return last, false, err
		}
	}
	if same {
		return last, false, nil
	}
	next := c.unclean && (c.restarted || !statUnchanged(&st, newest)) // the next mount's check records it
	return last, next || c.pending(p, st.Ino, id), fmt.Errorf("live content (%d bytes) differs from its last revision (%d bytes): a change was not recorded", st.Size, newest.Size)
}

// pending reports whether the change of live file id (inode ino, at p)
// is pending: it is open for writing (its latest change is not reported
// yet), or the pending journal names it, or the running mount excludes
// it and keeps it pending.
func (c *liveCheck) pending(p string, ino uint64, id fs.FileID) bool {
	return c.writing != nil && c.writing()[ino] || !id.IsZero() && c.journaled[id] ||
		!id.IsZero() && c.leftOut != nil && c.leftOut(p, id)
}

// journaledFiles reads the pending journal of the store in dir without
// changing it: the files a mount left to redo.
func journaledFiles(dir string) (map[fs.FileID]bool, error) {
	j, err := readJournal(dir)
	if err != nil {
		return nil, err
	}
	set := map[fs.FileID]bool{}
	for id := range j.pending {
		set[id] = true
	}
	return set, nil
}

// readJournal replays the pending journal of the store in dir without
// changing it.
func readJournal(dir string) (*journal, error) {
	b, err := os.ReadFile(filepath.Join(dir, journalFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	j := &journal{pending: map[fs.FileID]*pendingFile{}}
	j.replay(b)
	return j, nil
}

// continuedFiles returns the files whose history a new file the pending
// journal of the store in dir names continues (a save that left the
// path, killed before the new file was recorded): the next mount's redo
// binds each new file to that history, which must not be taken for a
// deleted file's before. The value is the new file's path.
func continuedFiles(dir string) (map[fs.FileID]string, error) {
	j, err := readJournal(dir)
	if err != nil {
		return nil, err
	}
	cont := map[fs.FileID]string{}
	for _, p := range j.pending {
		if !p.continues.IsZero() {
			cont[p.continues] = p.path
		}
	}
	return cont, nil
}

// sameContent reports whether the file at p, of inode ino, holds exactly
// want. It opens p under the live tree with no symlink followed and
// without waiting (a FIFO swapped in held a verify), and compares the
// file the check statted only (a file swapped in meanwhile is read as
// changed).
func (c *liveCheck) sameContent(p string, ino uint64, want *revText) (bool, error) {
	var f *os.File
	var err error
	if rel, rerr := filepath.Rel(c.live, p); rerr == nil && c.live != "" && !strings.HasPrefix(rel, "..") {
		f, err = fs.OpenReadBeneath(c.live, filepath.ToSlash(rel), syscall.O_NONBLOCK)
	} else {
		f, err = fs.OpenRead(p, syscall.O_NOFOLLOW|syscall.O_NONBLOCK)
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Ino != ino || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return false, err
	}
	buf, wbuf := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; {
		n, err := f.Read(buf)
		if n > 0 {
			if off+int64(n) > want.Size() {
				return false, nil
			}
			if _, werr := want.ReadAt(wbuf[:n], off); werr != nil && !(errors.Is(werr, io.EOF) && off+int64(n) == want.Size()) {
				return false, fmt.Errorf("its last revision does not read back: %w", werr)
			}
			if !bytes.Equal(buf[:n], wbuf[:n]) {
				return false, nil
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return off == want.Size(), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// VerifyReport is what a whole verification found: the store's summary
// and the live files'.
type VerifyReport struct {
	Store objstore.VerifySummary
	Live  LiveSummary
	// InterruptedRepack is the bytes a killed repack left in
	// STORE/repack/: not a problem (the next repack with the same
	// options resumes it), but space verify names.
	InterruptedRepack int64 `json:",omitempty"`
}

// Problems is the total of problems found.
func (r VerifyReport) Problems() int { return r.Store.Problems + r.Live.Problems }

// VerifyOffline checks the unmounted store st in dir: everything
// objstore.VerifyAll checks, then every live file against its last
// revision. After a mount that did not end cleanly, a live file that
// differs where the next mount's check will see it is pending (that
// mount records it), not a problem.
func VerifyOffline(ctx context.Context, st *objstore.Store, dir string, report func(objstore.Problem), progress func(objstore.VerifyProgress)) (VerifyReport, error) {
	var r VerifyReport
	var err error
	if r.Store, err = st.VerifyAll(ctx, report, progress); err != nil {
		return r, err
	}
	if r.InterruptedRepack, err = st.InterruptedRepackBytes(); err != nil {
		return r, err
	}
	ids, err := readIDs(dir)
	if err != nil {
		return r, err
	}
	lost, alone, err := lostIDs(dir, ids)
	if err != nil {
		return r, err
	}
	if lost != nil {
		// One line for the cause, where each live file would be
		// reported as never recorded with no word of why.
		r.Live.Problems++
		report(objstore.Problem{Kind: objstore.ProblemLive, Path: "live", Err: lost})
		if alone {
			return r, nil
		}
	}
	journaled, err := journaledFiles(dir)
	if err != nil {
		return r, err
	}
	unclean, restarted := readMark(dir)
	c := &liveCheck{st: st, live: filepath.Join(dir, liveDir), report: report, journaled: journaled, unclean: unclean, restarted: restarted,
		storeFile: func(id fs.FileID) (index.FileID, bool) { f, ok := ids[id]; return f, ok }}
	if _, err := os.Stat(c.live); errors.Is(err, os.ErrNotExist) {
		return r, nil // never mounted
	}
	r.Live, err = c.run(ctx)
	return r, err
}

// lostIDs returns, as lost, why the live files of the store in dir are
// not tied to their histories, if they are not: they lost their FileIDs
// (a copy without extended attributes, idsKeptByCopy; alone: checking
// each file would say nothing more), or live.ids maps none of them (lost
// or emptied, lostMapping: verify lists each file after this line). err
// is a failure to tell.
func lostIDs(dir string, ids map[fs.FileID]index.FileID) (lost error, alone bool, err error) {
	if err := idsKeptByCopy(dir, len(ids) > 0); errors.Is(err, errIDs) {
		return err, true, nil
	} else if err != nil {
		return nil, false, err
	}
	if len(ids) > 0 {
		return nil, false, nil
	}
	rel, err := lostMapping(dir, ids)
	if err != nil || rel == "" {
		return nil, false, err
	}
	return fmt.Errorf("%s: %w: it maps no history to live files a mount recorded (%s first, each listed below), which the pending journal does not name either: was it lost or emptied? Put back the live.ids of a copy or backup of the store", filepath.Join(dir, idsFile), errIDs, rel), false, nil
}

// verify checks the mounted store read-only, beside the mount's writers:
// it first waits until everything reported is recorded, then checks the
// store (objstore.VerifyAll) and every live file; a live file open for
// writing may disagree with its last revision (its change is pending). It
// stops when the mount starts closing.
func (m *running) verify(ctx context.Context, report func(objstore.Problem), progress func(objstore.VerifyProgress)) (VerifyReport, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-m.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	var r VerifyReport
	if err := m.rec.Sync(ctx); err != nil {
		return r, err
	}
	var err error
	if r.Store, err = m.st.VerifyAll(ctx, report, progress); err != nil {
		return r, err
	}
	if r.InterruptedRepack, err = m.st.InterruptedRepackBytes(); err != nil {
		return r, err
	}
	c := &liveCheck{st: m.st, live: filepath.Join(m.store, liveDir), report: report, settle: m.rec.Sync,
		writing: func() map[uint64]bool {
			set := map[uint64]bool{}
			for _, w := range m.fsys.Writers() {
				set[w.Node] = true
			}
			return set
		}}
	if m.jnl != nil && m.x != nil {
		c.leftOut = func(p string, id fs.FileID) bool {
			rel, err := filepath.Rel(c.live, p)
			return err == nil && m.x.excluded(filepath.ToSlash(rel)) && !m.jnl.clean(id)
		}
	}
	if m.sink != nil {
		c.storeFile = m.sink.storeID
	} else { // read-only: nothing is recorded, the ids file is as it was
		ids, err := readIDs(m.store)
		if err != nil {
			return r, err
		}
		c.storeFile = func(id fs.FileID) (index.FileID, bool) { f, ok := ids[id]; return f, ok }
	}
	r.Live, err = c.run(ctx)
	return r, err
}
