package mount

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	dfs "github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// LiveFiles returns the store files the live tree of the store in dir
// still holds: every regular file under dir/live whose FileID (its
// XattrID) live.ids maps to a store file. The garbage collector keeps
// their newest revision (and, by default, their history); a store file
// no live file maps to is a deleted file's.
//
// live.ids is not fsynced (see storesink.go): after a crash a live file
// may have started a new store identity, and the history of its old one
// then counts as a deleted file's.
func LiveFiles(dir string) (map[index.FileID]bool, error) {
	ids, err := readIDs(filepath.Join(dir, idsFile))
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
		var id dfs.FileID
		if n, err := unix.Lgetxattr(path, dfs.XattrID, id[:]); err != nil || n != len(id) {
			return nil // never recorded
		}
		if f, ok := ids[id]; ok {
			live[f] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("live files of %s: %w", dir, err)
	}
	return live, nil
}

// readIDs reads the id map of live.ids (a missing file is an empty map).
func readIDs(path string) (map[dfs.FileID]index.FileID, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[dfs.FileID]index.FileID{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	ids := make(map[dfs.FileID]index.FileID, len(b)/idRecordLen)
	for ; len(b) >= idRecordLen; b = b[idRecordLen:] {
		var id dfs.FileID
		copy(id[:], b)
		ids[id] = index.FileID(binary.BigEndian.Uint64(b[16:]))
	}
	return ids, nil
}
