package mount

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"

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
// (doc.go). The check costs a stat, an xattr read and an index lookup
// per live file, and reads only files changed since their newest
// revision (redoFile).
const mountedFile = "mounted"

// markMounted puts mountedFile in store, durably, before the mount
// serves, and reports whether it was there already: the previous mount
// did not end cleanly.
func markMounted(store string) (unclean bool, err error) {
	p := filepath.Join(store, mountedFile)
	if _, err := os.Lstat(p); err == nil {
		return true, nil
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("mark the store mounted: %w", err)
	}
	// Empty: its name is the mark, durable with the directory's fsync.
	if err = errors.Join(f.Close(), index.SyncDir(store)); err != nil {
		return false, fmt.Errorf("mark the store mounted: %w", errors.Join(err, os.Remove(p)))
	}
	return false, nil
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
// FileID is given one. A file whose stat says it has not changed since
// its newest revision (redoFile's first test) is not queued: an fsync
// waits for the redos queued before it, and after an unclean end that
// would be one per live file.
func (r *redoer) queueAll(rec *Recorder) int {
	queued := r.j.entries()
	var rds []*redo
	seen := map[fs.FileID]bool{}
	_ = filepath.WalkDir(r.live, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // an unreadable directory is skipped, not fatal
		}
		rel, err := filepath.Rel(r.live, p)
		if err != nil || r.x.excluded(filepath.ToSlash(rel)) {
			return nil
		}
		id := liveID(p)
		if id.IsZero() {
			// A file made through a mount has its FileID from its
			// create, but the xattr may not have reached the disk
			// where its data did (a power cut). The mount does not
			// serve yet: no attributes of it are cached.
			id = giveID(p)
		}
		if _, ok := queued[id]; ok || id.IsZero() || seen[id] {
			return nil
		}
		seen[id] = true
		if r.unchangedFile(id, p) {
			return nil
		}
		rds = append(rds, &redo{id: id, path: filepath.ToSlash(rel), checked: true})
		return nil
	})
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
	r.ls.mu.Lock()
	fid, known := r.ls.sink.ids[id]
	var prev index.RevID
	if known {
		prev = r.ls.sink.prev(fid)
	}
	r.ls.mu.Unlock()
	return known && r.unchangedSince(prev, fi)
}
