package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	dfs "github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
)

// LiveFiles returns the store files the live tree of the store in dir
// still holds: every regular file under dir/live whose FileID (its
// XattrID) live.ids maps to a store file. The garbage collector keeps
// their newest revision (and, by default, their history); a store file
// no live file maps to is a deleted file's.
//
// A record of live.ids is durable before the first revision of its
// store file is put (see storesink.go), so after a crash every store
// file with a revision is still mapped from its live file. A live file
// with content (and not too large to record) and a FileID that live.ids
// does not map, and that the pending journal does not name either (a change the next mount
// records), was recorded under a mapping live.ids lost: LiveFiles then
// fails (errIDs), as gc would take that file's history for a deleted
// file's and remove it.
func LiveFiles(dir string) (map[index.FileID]bool, error) {
	ids, err := readIDs(dir)
	if err != nil {
		return nil, err
	}
	pending, err := journaledFiles(dir)
	if err != nil {
		return nil, err
	}
	if err := idsKeptByCopy(dir, len(ids) > 0); err != nil {
		return nil, err
	}
	live := map[index.FileID]bool{}
	at := map[index.FileID]string{} // a path of each (hard links share one)
	var twice error
	first, n := "", 0
	err = walkLiveFiles(dir, ids, func(f index.FileID, rel string) {
		live[f] = true
		if other, ok := at[f]; !ok {
			at[f] = rel
		} else if twice == nil && !sameInode(filepath.Join(dir, liveDir, other), filepath.Join(dir, liveDir, rel)) {
			twice = fmt.Errorf("%s and %s are two files with one deltafs id (the xattr %s): was the store copied without its hard links? Copy a store with cp -a or rsync -aHX", other, rel, dfs.XattrID)
		}
	}, func(id dfs.FileID, rel string, size int64) bool {
		if lostOne(pending, id, size) {
			if n++; n == 1 {
				first = rel
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if twice != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, liveDir), twice)
	}
	if n > 0 {
		return nil, unmappedError(dir, first, n)
	}
	cont, err := continuedFiles(dir)
	if err != nil {
		return nil, err
	}
	for id := range cont {
		if f, ok := ids[id]; ok {
			live[f] = true // the next mount's redo continues it
		}
	}
	return live, nil
}

// lostOne reports whether a live file with FileID id and size bytes,
// which live.ids does not map, was recorded under a mapping live.ids
// lost: it has content a revision may hold, and the pending journal
// does not name it (a change the next mount records).
func lostOne(pending map[dfs.FileID]bool, id dfs.FileID, size int64) bool {
	return size > 0 && size <= maxRecordBytes && !pending[id]
}

// unmappedError says that n live files of the store in dir, first among
// them rel, have no history in live.ids although a mount recorded them.
func unmappedError(dir, rel string, n int) error {
	return fmt.Errorf("%s: %w: it maps no history to %d live file(s) with content and an id (%s first), which the pending journal does not name either; their histories would be taken for deleted files' (deltafs verify lists them; put back the live.ids of a copy or backup of the store)",
		filepath.Join(dir, idsFile), errIDs, n, rel)
}

// lostMapping returns a live file of the store in dir that a mount
// recorded but ids (live.ids as read) does not map, if there is one
// (see LiveFiles): the mount checks for one when ids is empty (a
// live.ids lost, or replaced by an empty file), before it would record
// every such file as a new one.
func lostMapping(dir string, ids map[dfs.FileID]index.FileID) (string, error) {
	pending, err := journaledFiles(dir)
	if err != nil {
		return "", err
	}
	var lost string
	err = walkLiveFiles(dir, ids, nil, func(id dfs.FileID, rel string, size int64) bool {
		if lostOne(pending, id, size) {
			lost = rel
		}
		return lost == ""
	})
	return lost, err
}

// eachLiveFile calls fn with the store file and the path (relative to the
// tree root) of every regular file under dir/live whose FileID ids maps
// to a store file.
func eachLiveFile(dir string, ids map[dfs.FileID]index.FileID, fn func(index.FileID, string)) error {
	return walkLiveFiles(dir, ids, fn, nil)
}

// errStopWalk ends walkLiveFiles early.
var errStopWalk = errors.New("stop")

// walkLiveFiles is eachLiveFile that also calls unmapped (if not nil)
// with the FileID, path and size of every regular file with a FileID
// that ids does not map, until unmapped returns false.
func walkLiveFiles(dir string, ids map[dfs.FileID]index.FileID, fn func(index.FileID, string), unmapped func(dfs.FileID, string, int64) bool) error {
	root := filepath.Join(dir, liveDir)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile, or no live tree yet
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		id, err := readFileID(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile (a mount's live tree changes)
		}
		if err != nil {
			return err
		}
		if id.IsZero() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if f, ok := ids[id]; ok {
			if fn != nil {
				fn(f, rel)
			}
			return nil
		}
		if unmapped == nil {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !unmapped(id, rel, info.Size()) {
			return errStopWalk
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopWalk) {
		return fmt.Errorf("live files of %s: %w", dir, err)
	}
	return nil
}

// sameInode reports whether the files at a and b are one inode.
func sameInode(a, b string) bool {
	var sa, sb syscall.Stat_t
	return syscall.Lstat(a, &sa) == nil && syscall.Lstat(b, &sb) == nil && sa.Ino == sb.Ino && sa.Dev == sb.Dev
}

// maxIDProbe is how many live files with content and no FileID
// idsKeptByCopy looks at before it takes the store for a copy that
// dropped them.
const maxIDProbe = 1000

// idsKeptByCopy fails if the live files of the store in dir seem to
// have lost their FileIDs (user xattrs) while its live.ids maps
// histories (maps): none of them carries one among the first maxIDProbe with
// content. rsync -a, tar and cp -r copy a store so; a mount of the copy
// recorded every file as a new one, and gc took every history for a
// deleted file's and removed it (a user review). Files made behind a
// mount's back carry none either, but a store a mount used has some
// that do; the walk stops at the first.
func idsKeptByCopy(dir string, maps bool) error {
	if !maps {
		return nil
	}
	root := filepath.Join(dir, liveDir)
	first, n, found := "", 0, false
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if id, err := readFileID(path); err == nil && !id.IsZero() {
			found = true
			return filepath.SkipAll
		}
		if info, err := d.Info(); err != nil || info.Size() == 0 {
			return nil
		}
		if n++; n == 1 {
			first, _ = filepath.Rel(root, path)
		}
		if n >= maxIDProbe {
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil || found || n == 0 {
		return err
	}
	return fmt.Errorf("%s: %w: it maps histories, but no live file carries a deltafs id (the xattr %s; %s first): was the store copied without its extended attributes? Copy a store with cp -a or rsync -aHX", filepath.Join(dir, idsFile), errIDs, dfs.XattrID, first)
}

// LivePaths returns the path of each store file's live file in the store
// in dir (one of its names, for a file with hard links): where a salvage
// looks first for a lost revision's content (objstore.Salvage).
func LivePaths(dir string) (map[index.FileID]string, error) {
	ids, err := readIDs(dir)
	if err != nil {
		return nil, err
	}
	paths := map[index.FileID]string{}
	err = walkLiveFiles(dir, ids, func(f index.FileID, rel string) {
		if _, ok := paths[f]; !ok {
			paths[f] = filepath.Join(dir, liveDir, filepath.FromSlash(rel))
		}
	}, nil)
	return paths, err
}
