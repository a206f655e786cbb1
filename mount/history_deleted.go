package mount

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"golang.org/x/sys/unix"
)

// Deleted files. A file removed from the live tree keeps its revisions in
// the store until gc removes them (those no snapshot holds), but no live
// path leads to them any more. They are the store files that no live
// file maps to, the same rule gc uses (LiveFiles): a listing shows what
// gc would treat as deleted, and a file gc emptied is not listed. Each
// is named by its record's name (index.FileMeta.Name), which every put
// of the mount sets to the path the content was read from
// (objstore.PutRequest.Name), and the unlink of a file that may have
// moved in this mount to the path it left (storeSink.removed, with the
// next group commit: Recorder.moves keeps an rm -rf of files that never
// moved from queueing anything). A file moved in an earlier mount after
// its last change, or removed outside a mount, keeps its last
// revision's path.
//
// A history call whose path names no live file takes the newest deleted
// file whose last path it is (FileInfo.Deleted says so); Target.File picks
// any store file by id. A restore of a deleted file makes it again, as
// a new live file bound to the same store file (storeSink.adopting): its
// history continues, and the restored revision's first parent is the
// deleted file's last (a dedup of the revision brought back, when its
// content is that revision's).

// errNoLiveFile matches a path with no live file (openLiveFile).
var errNoLiveFile error = &kindError{msg: "no such file", kind: index.ErrNotFound}

// Deleted lists the deleted files whose last path is dir or under it
// ("" or "." for the whole tree), newest last revision first.
func (h *historian) Deleted(ctx context.Context, dir string) ([]DeletedFile, error) {
	scope := path.Clean("/" + filepath.ToSlash(dir))[1:]
	if scope == "." {
		scope = ""
	}
	live, err := h.liveFiles(ctx)
	if err != nil {
		return nil, err
	}
	var out []DeletedFile
	err = h.st.Files(ctx, func(f index.FileID, m index.FileMeta) error {
		if _, ok := live[f]; !ok && m.Revs > 0 && underDir(m.Name, scope) {
			out = append(out, DeletedFile{FileInfo: FileInfo{Path: ByteString(m.Name), File: uint64(f), Deleted: true}})
		}
		return nil
	})
	if err != nil {
		return nil, wrapCorrupt(err)
	}
	kept := out[:0]
	for _, d := range out {
		err := h.st.Revisions(ctx, index.FileID(d.File), func(e index.Entry) error {
			d.Revisions++
			d.Time, d.Size = time.Unix(0, e.Time).UTC(), e.Size
			return nil
		})
		if err != nil {
			return nil, wrapCorrupt(err)
		}
		if d.Revisions > 0 { // else gc removed them all
			kept = append(kept, d)
		}
	}
	slices.SortFunc(kept, func(a, b DeletedFile) int {
		return cmp.Or(b.Time.Compare(a.Time), cmp.Compare(b.File, a.File))
	})
	return kept, nil
}

// underDir reports whether the path name is dir or under it ("": the
// whole tree).
func underDir(name, dir string) bool {
	return dir == "" || name == dir || strings.HasPrefix(name, dir+"/")
}

// liveFiles returns the store files live files map to, with one path of
// each; in a mount, after everything reported so far is recorded (a
// file removed with a change pending has that change in its history).
func (h *historian) liveFiles(ctx context.Context) (map[index.FileID]string, error) {
	if h.rec != nil {
		if err := h.rec.Sync(ctx); err != nil {
			return nil, fmt.Errorf("record pending changes: %w", err)
		}
	}
	if err := h.st.Flush(); err != nil { // the names removals set (storeSink.removed)
		return nil, err
	}
	ids, err := readIDs(h.dir)
	if err != nil {
		return nil, err
	}
	live := map[index.FileID]string{}
	err = eachLiveFile(h.dir, ids, func(f index.FileID, rel string) {
		if _, ok := live[f]; !ok {
			live[f] = rel
		}
	})
	return live, err
}

// target resolves t to the store file it names (see Target), the live
// file it has (for a deleted file: where a restore makes it) and what
// was found.
func (h *historian) target(ctx context.Context, t Target) (FileInfo, liveFile, index.FileID, error) {
	if t.File == 0 {
		lf, fid, err := h.resolve(ctx, t.Path)
		if err == nil {
			return FileInfo{Path: ByteString(lf.Rel), File: uint64(fid)}, lf, fid, nil
		}
		if !errors.Is(err, errNoLiveFile) {
			return FileInfo{}, lf, 0, err
		}
		list, derr := h.Deleted(ctx, lf.Rel)
		if derr != nil {
			return FileInfo{}, lf, 0, derr
		}
		for _, d := range list {
			if string(d.Path) == lf.Rel {
				return d.FileInfo, lf, index.FileID(d.File), nil
			}
		}
		return FileInfo{}, lf, 0, &kindError{msg: lf.Rel + ": no such file, nor a deleted file's history", kind: errNoLiveFile}
	}
	fid := index.FileID(t.File)
	m, err := h.st.File(fid)
	if errors.Is(err, index.ErrNotFound) {
		return FileInfo{}, liveFile{}, 0, notFoundf("no file %d in the store", t.File)
	} else if err != nil {
		return FileInfo{}, liveFile{}, 0, wrapCorrupt(err)
	}
	live, err := h.liveFiles(ctx)
	if err != nil {
		return FileInfo{}, liveFile{}, 0, err
	}
	if p, ok := live[fid]; ok {
		lf, lfid, err := h.resolve(ctx, p)
		if err == nil && lfid != fid {
			err = fmt.Errorf("%s: file %d moved while it was looked up", p, fid)
		}
		return FileInfo{Path: ByteString(lf.Rel), File: t.File}, lf, fid, err
	}
	dest := t.Path
	if dest == "" {
		dest = m.Name
	}
	c, err := cleanRel(dest)
	if err != nil {
		return FileInfo{}, liveFile{}, 0, err
	}
	lf := liveFile{Rel: c, Path: filepath.Join(h.dir, liveDir, filepath.FromSlash(c))}
	return FileInfo{Path: ByteString(m.Name), File: t.File, Deleted: true}, lf, fid, nil
}

// restoreDeleted makes the deleted file fid again at lf with the content
// text of its revision old, as the next revision of its history.
func (h *historian) restoreDeleted(ctx context.Context, lf liveFile, fid index.FileID, old index.RevID, text *revText) (index.RevID, error) {
	if _, err := os.Lstat(lf.Path); err == nil {
		return index.NullRev, &kindError{kind: index.ErrExists,
			msg: fmt.Sprintf("%s exists: give another path to restore file %d to (--id %d)", lf.Rel, fid, fid)}
	}
	if h.mnt != "" {
		return h.restoreDeletedMounted(ctx, lf, fid, old, text)
	}
	return h.restoreDeletedOffline(ctx, lf, fid, old, text)
}

// restoreDeletedMounted creates the file through the mount point, binds
// its live identity to fid before its change is recorded, and writes
// text as restoreMounted does.
func (h *historian) restoreDeletedMounted(ctx context.Context, lf liveFile, fid index.FileID, old index.RevID, text *revText) (index.RevID, error) {
	// Beneath the mount point, no symlink followed (beneath.go).
	if err := mkdirAllBeneath(h.mnt, path.Dir(lf.Rel), 0o755); err != nil {
		return index.NullRev, err
	}
	f, err := openBeneath(h.mnt, lf.Rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return index.NullRev, err
	}
	id, err := readFileID(lf.Path)
	if err == nil && id.IsZero() {
		err = errors.New("the live file has no file id (no user xattrs?)")
	}
	if err != nil {
		return index.NullRev, errors.Join(err, removeBeneath(h.mnt, lf.Rel, f), f.Close())
	}
	s := h.ls.sink
	h.ls.mu.Lock()
	before := s.prev(fid)
	s.adopting[id], s.restoring[fid] = fid, restoreOf(old, text)
	h.ls.mu.Unlock()
	werr := writeSparse(f, text, text.Size())
	if werr == nil {
		werr = f.Sync()
	}
	werr = errors.Join(werr, f.Close())
	ferr := h.rec.Flush(ctx, id)
	h.ls.mu.Lock()
	delete(s.adopting, id)
	delete(s.restoring, fid)
	now := s.prev(fid)
	h.ls.mu.Unlock()
	if err := errors.Join(werr, ferr); err != nil {
		return index.NullRev, err
	}
	if now == before {
		return index.NullRev, errors.New("the mount recorded no new revision (see its log)")
	}
	return now, nil
}

// restoreDeletedOffline creates the live file with a new live identity,
// binds it to fid and records the revision itself.
func (h *historian) restoreDeletedOffline(ctx context.Context, lf liveFile, fid index.FileID, old index.RevID, text *revText) (index.RevID, error) {
	live := filepath.Join(h.dir, liveDir)
	if err := mkdirAllBeneath(live, path.Dir(lf.Rel), 0o755); err != nil {
		return index.NullRev, err
	}
	f, err := openBeneath(live, lf.Rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return index.NullRev, err
	}
	id := fs.NewFileID()
	err = unix.Fsetxattr(int(f.Fd()), fs.XattrID, id[:], unix.XATTR_CREATE)
	if err == nil {
		err = writeSparse(f, text, text.Size())
	}
	if err != nil {
		return index.NullRev, errors.Join(err, removeBeneath(live, lf.Rel, f), f.Close())
	}
	var mine unix.Stat_t
	ferr := unix.Fstat(int(f.Fd()), &mine)
	if err := f.Close(); err != nil {
		if ferr == nil {
			err = errors.Join(err, removeInoBeneath(live, lf.Rel, mine))
		}
		return index.NullRev, err
	}
	h.ls.mu.Lock()
	defer h.ls.mu.Unlock()
	s := h.ls.sink
	if err := errors.Join(s.bind(id, fid), s.syncIDs()); err != nil { // the mapping before the revision
		return index.NullRev, err
	}
	e, err := h.putText(ctx, objstore.PutRequest{File: fid, P1: s.prev(fid), P2: old, Hints: []index.RevID{old}, Name: lf.Rel}, text)
	if err != nil {
		return index.NullRev, err
	}
	s.last[fid] = e.ID()
	delete(s.known, fid)
	return e.ID(), nil
}
