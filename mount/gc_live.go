package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

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
	root := filepath.Join(dir, liveDir)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
			live[f] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("live files of %s: %w", dir, err)
	}
	return live, nil
}
