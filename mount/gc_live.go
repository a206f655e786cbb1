package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

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
// file with a revision is still mapped from its live file.
func LiveFiles(dir string) (map[index.FileID]bool, error) {
	ids, err := readIDs(dir)
	if err != nil {
		return nil, err
	}
	live := map[index.FileID]bool{}
	err = eachLiveFile(dir, ids, func(f index.FileID, _ string) { live[f] = true })
	return live, err
}

// eachLiveFile calls fn with the store file and the path (relative to the
// tree root) of every regular file under dir/live whose FileID ids maps
// to a store file.
func eachLiveFile(dir string, ids map[dfs.FileID]index.FileID, fn func(index.FileID, string)) error {
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
		if f, ok := ids[id]; ok && !id.IsZero() {
			rel, _ := filepath.Rel(root, path)
			fn(f, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("live files of %s: %w", dir, err)
	}
	return nil
}
