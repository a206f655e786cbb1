package index

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SyncDir fsyncs the directory dir, so that the names made, renamed or
// removed in it survive a power cut: an fsync of a file makes its data
// durable, not its name. The index needs it for badger's files
// (powercut.go), the store for its segments and shadows, the mount for
// its journal: it lives here, at the bottom of the imports, for all three.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// MkdirAllSync is os.MkdirAll, durably: each directory it makes is
// fsynced in its parent, so that a power cut after a store was created
// (and acknowledged writes) does not take the store's directory away.
// A directory another process makes meanwhile is left to it to sync.
func MkdirAllSync(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if parent != dir {
		if _, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) {
			if err := MkdirAllSync(parent, perm); err != nil {
				return err
			}
		}
	}
	if err := os.Mkdir(dir, perm); err != nil {
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return nil // made meanwhile by someone else, who syncs it
		}
		return err
	}
	if err := SyncDir(parent); err != nil {
		return fmt.Errorf("fsync %s: %w", parent, err)
	}
	return nil
}
