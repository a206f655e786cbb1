package objstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/deltafs/deltafs/index"
)

// ErrSegmentShort is matched by the damage a store reports (Store.Damage):
// a segment shorter than the index says, whose records past its end are
// lost.
var ErrSegmentShort = errors.New("segment shorter than the committed tail")

// damageFile marks a store found damaged, with the damage's message. The
// first writable open that finds a tail segment cut short writes it: the
// store's next append would write past the cut, leaving a hole where the
// lost records were, and no later open could tell from the segment's
// length. Every open reads it (Store.Damage); a verify that finds the
// store clean removes it (the segment was put back from a backup).
const damageFile = "DAMAGE"

// markDamage records damage in the store in dir, unless it is recorded.
func markDamage(dir string, damage error) error {
	if _, err := os.Stat(filepath.Join(dir, damageFile)); err == nil {
		return nil
	}
	if err := WriteFileSync(filepath.Join(dir, damageFile), []byte(damage.Error()+"\n"), 0o600); err != nil {
		return fmt.Errorf("objstore: mark the store damaged: %w", err)
	}
	return nil
}

// readDamage returns the damage recorded in the store in dir, or nil;
// err is a failure to read the mark.
func readDamage(dir string) (damage, err error) {
	b, err := os.ReadFile(filepath.Join(dir, damageFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("objstore: %w", err)
	}
	return &damageError{msg: strings.TrimSpace(string(b))}, nil
}

// damageError is recorded damage: its message as found, matching
// ErrSegmentShort.
type damageError struct{ msg string }

func (e *damageError) Error() string { return e.msg }
func (e *damageError) Unwrap() error { return ErrSegmentShort }

// clearDamage removes the mark of damage from the store in dir: a verify
// found it clean.
func (s *Store) clearDamage() error {
	s.damageMu.Lock()
	defer s.damageMu.Unlock()
	if s.damage == nil {
		return nil
	}
	if err := os.Remove(filepath.Join(s.dir, damageFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("objstore: %w", err)
	}
	s.damage = nil
	return index.SyncDir(s.dir)
}
