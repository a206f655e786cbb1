package fs_test

import (
	"fmt"
	"io"
	"sync"

	"github.com/deltafs/deltafs/fs"
)

// contract checks every Change against the documented relation between
// a file's revisions: below Kept and outside Dirty, the new content
// equals the previous report's. It keeps the last content per FileID.
type contract struct {
	mu         sync.Mutex
	prev       map[fs.FileID][]byte
	violations []string
	checked    int
}

func newContract() *contract { return &contract{prev: map[fs.FileID][]byte{}} }

func (k *contract) check(c fs.Change) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c.Content == nil || c.ID.IsZero() {
		k.violations = append(k.violations, fmt.Sprintf("%s: no content or no id", c.Path))
		return
	}
	live, err := io.ReadAll(io.NewSectionReader(c.Content, 0, 1<<40))
	if err != nil || int64(len(live)) != c.Size {
		k.violations = append(k.violations, fmt.Sprintf("%s: read %d bytes (%v), Size %d", c.Path, len(live), err, c.Size))
		return
	}
	old, known := k.prev[c.ID]
	k.prev[c.ID] = live
	k.checked++
	if c.Whole || c.New || c.Kept == 0 { // Kept 0 claims nothing (an empty file made by mknod, first written)
		return
	}
	if !known || c.Kept > int64(len(old)) {
		k.violations = append(k.violations, fmt.Sprintf("%s: Kept %d but the previous content has %d bytes (known %v)", c.Path, c.Kept, len(old), known))
		return
	}
	dirty := func(i int64) bool {
		for _, r := range c.Dirty {
			if i >= r.Off && i < r.End() {
				return true
			}
		}
		return false
	}
	for i := int64(0); i < c.Kept; i++ {
		if !dirty(i) && live[i] != old[i] {
			k.violations = append(k.violations, fmt.Sprintf("%s: byte %d changed outside the dirty ranges %v (Kept %d)", c.Path, i, c.Dirty, c.Kept))
			return
		}
	}
}

// report returns the violations so far.
func (k *contract) report() ([]string, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.violations...), k.checked
}
