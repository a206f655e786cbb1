package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/objstore"
)

// checkStorePath says of a store path that does not exist what stats,
// snapshot and the history commands say of one, "PATH: not a deltafs
// store...: no such file or directory" (exit 5), for the commands that
// open the store itself and create nothing (gc, repack, mount
// --read-only): the store's own check only finds no FORMAT file in it.
func checkStorePath(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return fmt.Errorf("%s: %w: no such file or directory", path, objstore.ErrNotStore)
}
