package index

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// removeEmptyMemtables deletes zero-length badger memtable logs (*.mem) in
// dir. badger creates one on every open and sizes it right after; a process
// killed in between leaves an empty file that badger then refuses to open
// ("Create a new file"). An empty log holds no writes, so removing it loses
// nothing.
func removeEmptyMemtables(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".mem") || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() == 0 {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("index: remove empty memtable: %w", err)
			}
		}
	}
	return nil
}
