package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// mountedFile is in a store while a writable mount may change its live
// tree, and stays there when the mount does not end cleanly (killed, a
// power cut, a shutdown that left changes unrecorded). The next mount
// then checks every live file against its newest revision (queueAll),
// not only the files the pending journal names: a power cut keeps
// whatever the disk had written, and the disk may hold a live file's
// change without the journal record that names it. The mount fsyncs a
// file's data before its revision is durable (an fsync cut short), the
// kernel writes dirty pages back whenever it likes, and a passthrough
// writer's pages never pass through the mount at all; the journal is
// fsynced only where an fsync returns before its revision is durable
// (doc.go).
//
// The mark holds the id of a boot in which every live file's ctime
// agreed with its history: the one it was made in, or the one in which
// a mount finished the check after a restart (trustBoot). While that
// kernel runs, its inodes are the truth: a file whose size and ctime say
// it has not changed since its newest revision has not, and the check
// costs a stat, an xattr read and an index lookup per live file, reading
// only the files changed since (redoFile). After a restart (a power cut)
// the disk's ctime may be older than its data: the data of an overwrite
// can reach the disk before the journal commit of the inode's new ctime,
// and with lazytime the ctime waits for the next inode update. The check
// then hashes every live file of the size of its newest revision before
// the mount serves, at the disk's read speed, and the redos read every
// file they redo. A mark that lost its content to the cut reads as
// another boot's.
const mountedFile = "mounted"

// markMounted puts mountedFile in store, durably, before the mount
// serves, and reports whether it was there already (the previous mount
// did not end cleanly) and, if so, whether the machine restarted since
// it was made. A mark found is left as it is: a mount killed again in
// this boot leaves the next one the same full check.
func markMounted(store string) (unclean, restarted bool, err error) {
	p := filepath.Join(store, mountedFile)
	if unclean, restarted := readMark(store); unclean {
		return true, restarted, nil
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, false, fmt.Errorf("mark the store mounted: %w", err)
	}
	// The boot id is not fsynced: the name is the mark, durable with the
	// directory's fsync, and a content lost reads as another boot's.
	_, err = f.WriteString(bootID())
	if err = errors.Join(err, f.Close(), index.SyncDir(store)); err != nil {
		return false, false, fmt.Errorf("mark the store mounted: %w", errors.Join(err, os.Remove(p)))
	}
	return false, false, nil
}

// readMark reports whether store holds mountedFile and, if so, whether
// it names another boot than this one.
func readMark(store string) (marked, restarted bool) {
	p := filepath.Join(store, mountedFile)
	if _, err := os.Lstat(p); err != nil {
		return false, false
	}
	b, err := os.ReadFile(p)
	boot := bootID()
	return true, err != nil || boot == "" || string(b) != boot
}

// trustBoot writes this boot's id into the mark once every redo queued
// at the mount, the check's after a restart among them, has run without
// error, and the check read every directory: the live files then agree
// with their history as this kernel sees them, and an unclean end later
// in this boot needs only the stat check. It gives up when the mount
// closes first. The mark is opened without O_CREATE: a clean unmount
// that removed it is not undone (a removal after the open leaves the
// write in an unlinked file).
func (r *redoer) trustBoot(rec *Recorder, closing <-chan struct{}, store string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := rec.waitRedos(ctx); err != nil || r.failed.Load() > 0 || r.skipped.Load() {
		return
	}
	f, err := os.OpenFile(filepath.Join(store, mountedFile), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	// Not fsynced: a content lost reads as another boot's.
	if _, err := f.WriteString(bootID()); err == nil {
		r.log.Debug("every live file agrees with its history in this boot")
	}
	f.Close()
}

// bootID returns the running kernel's boot id, or "" if it cannot be
// read (then every unclean end is taken for a restart).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// markClean removes mountedFile: the mount ended with every change
// recorded and the journal empty.
func markClean(store string) error {
	if err := os.Remove(filepath.Join(store, mountedFile)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	return index.SyncDir(store)
}

// queueAll queues the redo of every live regular file with a FileID
// that is not excluded and not queued already (queue: the journal's),
// after a mount that did not end cleanly (mountedFile), and returns how
// many. A file a hard link names twice is queued once; a file with no
// FileID is given one. A file that has not changed since its newest
// revision is not queued: an fsync waits for the redos queued before it,
// and after an unclean end that would be one per live file. It is told
// by its stat, or after a restart (r.restarted) by its content's hash.
func (r *redoer) queueAll(rec *Recorder) int {
	queued := r.j.entries()
	var rds []*redo
	var lost []string // live files with no FileID
	seen := map[fs.FileID]bool{}
	_ = filepath.WalkDir(r.live, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			r.skipped.Store(true) // an unreadable directory is skipped, not fatal
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(r.live, p)
		if err != nil || r.x.excluded(filepath.ToSlash(rel)) {
			return nil
		}
		id := liveID(p)
		if id.IsZero() {
			lost = append(lost, filepath.ToSlash(rel))
			return nil
		}
		if _, ok := queued[id]; ok || seen[id] {
			return nil
		}
		seen[id] = true
		rds = append(rds, &redo{id: id, path: filepath.ToSlash(rel), checked: true})
		return nil
	})
	for _, rd := range r.giveBack(lost) {
		if _, ok := queued[rd.id]; !ok && !seen[rd.id] {
			seen[rd.id] = true
			rds = append(rds, rd)
		}
	}
	rds = r.changed(rds)
	r.mu.Lock()
	if r.todo == nil {
		r.todo = make(map[fs.FileID]bool, len(rds))
	}
	for _, rd := range rds {
		r.todo[rd.id] = true
	}
	r.mu.Unlock()
	for _, rd := range rds {
		rec.queueRedo(rd)
	}
	return len(rds)
}

// giveBack gives each live file of lost (which has no FileID) one, and
// returns their redos. A file made through a mount has its FileID from
// its create, but the xattr may not have reached the disk where its data
// did (a power cut). It gets back the FileID of the history last at its
// path (vacated) if it was born no later than that history's newest
// revision: a file made at the path after it is another file (vacated.go
// says the same of a path vacated long ago). Else a new FileID. The
// mount does not serve yet: no attributes are cached.
func (r *redoer) giveBack(lost []string) []*redo {
	if len(lost) == 0 {
		return nil
	}
	vacated := r.vacated()
	// The paths with a history first: a hard link without one would
	// give the inode a new FileID before its other name got the old.
	var first, then []string
	for _, rel := range lost {
		if _, ok := vacated[rel]; ok {
			first = append(first, rel)
		} else {
			then = append(then, rel)
		}
	}
	var rds []*redo
	for _, rel := range append(first, then...) {
		p := filepath.Join(r.live, rel)
		v, ok := vacated[rel]
		var id fs.FileID
		if ok && bornBy(p, v.newest) && unix.Lsetxattr(p, fs.XattrID, v.id[:], unix.XATTR_CREATE) == nil {
			delete(vacated, rel)
			id = v.id
			r.log.Info("a live file lost its FileID; it continues the history last at its path", "path", rel)
		} else if id = giveID(p); id.IsZero() {
			id = liveID(p) // another name of its inode gave it one
		}
		if !id.IsZero() {
			rds = append(rds, &redo{id: id, path: rel, checked: true})
		}
	}
	return rds
}

// vacatedHistory is a history no live file has: its live FileID, and its
// newest revision's time (Unix nanoseconds).
type vacatedHistory struct {
	id     fs.FileID
	newest int64
}

// vacated maps the last path of each store file whose live FileID no
// live file has to that history (of two at one path, the newer store
// file's). It walks the live tree for every FileID (excluded files and
// the journal's too), and returns nothing if a directory could not be
// read: a FileID it did not see may be a live file's.
func (r *redoer) vacated() map[string]vacatedHistory {
	live, complete := map[fs.FileID]bool{}, true
	_ = filepath.WalkDir(r.live, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			complete = false
		} else if d.Type().IsRegular() {
			live[liveID(p)] = true
		}
		return nil
	})
	if !complete {
		return nil
	}
	r.ls.mu.Lock()
	gone := map[fs.FileID]index.FileID{}
	for id, fid := range r.ls.sink.ids {
		if !live[id] {
			gone[id] = fid
		}
	}
	r.ls.mu.Unlock()
	out, fids := map[string]vacatedHistory{}, map[string]index.FileID{}
	for id, fid := range gone {
		m, err := r.st.File(fid)
		if err != nil || m.Name == "" || m.Revs == 0 || fids[m.Name] > fid {
			continue
		}
		e, ok, err := r.st.Latest(fid)
		if err != nil || !ok {
			continue
		}
		out[m.Name], fids[m.Name] = vacatedHistory{id: id, newest: e.Time}, fid
	}
	return out
}

// bornBy reports whether the file at p was born (statx's btime) no later
// than t, Unix nanoseconds; false where the file system keeps no btime.
func bornBy(p string, t int64) bool {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx); err != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return false
	}
	return stx.Btime.Sec*1e9+int64(stx.Btime.Nsec) <= t
}

// checkers is how many live files the check looks at at once: it waits
// on the disk more than on a core (a cold cache after a restart).
const checkers = 8

// changed returns the redos of rds whose file changed since its newest
// revision, in their order: by stat, or after a restart by hash.
func (r *redoer) changed(rds []*redo) []*redo {
	same := make([]bool, len(rds))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(checkers, len(rds)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(rds); i = int(next.Add(1) - 1) {
				p := filepath.Join(r.live, rds[i].path)
				if r.restarted {
					same[i] = r.sameHash(context.Background(), rds[i].id, p)
				} else {
					same[i] = r.unchangedFile(rds[i].id, p)
				}
			}
		})
	}
	wg.Wait()
	out := rds[:0]
	for i, rd := range rds {
		if !same[i] {
			out = append(out, rd)
		}
	}
	return out
}

// syncLive makes the file system holding the live directory durable
// (syncfs(2)): every live file's data and name.
func syncLive(live string) error {
	f, err := os.Open(live)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync the live tree: %w", err)
	}
	return nil
}

// unchangedFile reports whether the live file at p, of FileID id, has
// not changed since its newest revision, by its stat alone
// (redoer.unchangedSince).
func (r *redoer) unchangedFile(id fs.FileID, p string) bool {
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	prev, known := r.newest(id)
	return known && r.unchangedSince(prev, fi)
}

// sameHash reports whether the live file at p, of FileID id, has the
// size and content of its newest revision, reading it through once
// (storeHolds, as a snapshot compares a file).
func (r *redoer) sameHash(ctx context.Context, id fs.FileID, p string) bool {
	prev, known := r.newest(id)
	if !known {
		return false
	}
	e, err := r.st.Entry(prev)
	if err != nil {
		return false
	}
	f, err := fs.OpenRead(p, unix.O_NOFOLLOW)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || uint64(fi.Size()) != e.Size {
		return false
	}
	same, err := storeHolds(ctx, r.st, e, io.NewSectionReader(f, 0, int64(e.Size)))
	fi, serr := f.Stat() // and it did not grow past the section read
	return err == nil && same && serr == nil && uint64(fi.Size()) == e.Size
}

// newest returns the newest revision of the store file bound to id.
func (r *redoer) newest(id fs.FileID) (index.RevID, bool) {
	r.ls.mu.Lock()
	defer r.ls.mu.Unlock()
	fid, known := r.ls.sink.ids[id]
	if !known {
		return index.RevID{}, false
	}
	return r.ls.sink.prev(fid), true
}
