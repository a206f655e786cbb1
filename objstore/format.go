package objstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FormatVersion is the on-disk format this package writes and reads.
const FormatVersion = 1

const formatMagic = "deltafs-store"

var (
	// ErrNotStore: the directory holds no deltafs store (and Create was not set,
	// or it is not empty).
	ErrNotStore = errors.New("not a deltafs store")
	// ErrFormat: the store's format version is unknown or newer than this build.
	ErrFormat = errors.New("unsupported store format")
)

// readFormat parses dir/FORMAT: "deltafs-store\nformat N\n".
func readFormat(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "FORMAT"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("objstore: %s: %w (no FORMAT file)", dir, ErrNotStore)
	}
	if err != nil {
		return 0, fmt.Errorf("objstore: %w", err)
	}
	return parseFormat(dir, b)
}

// parseFormat parses the contents of a FORMAT file.
func parseFormat(dir string, b []byte) (int, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || lines[0] != formatMagic {
		return 0, fmt.Errorf("objstore: %s: %w (bad FORMAT file)", dir, ErrNotStore)
	}
	v, err := strconv.Atoi(strings.TrimPrefix(lines[1], "format "))
	if err != nil || !strings.HasPrefix(lines[1], "format ") {
		return 0, fmt.Errorf("objstore: %s: %w: unreadable version %q", dir, ErrFormat, lines[1])
	}
	if v != FormatVersion {
		return v, fmt.Errorf("objstore: %s: %w: version %d, this build reads %d", dir, ErrFormat, v, FormatVersion)
	}
	return v, nil
}

// writeFormat writes dir/FORMAT atomically (temp file, fsync, rename, fsync dir).
func writeFormat(dir string) error {
	tmp := filepath.Join(dir, "FORMAT.tmp")
	text := fmt.Sprintf("%s\nformat %d\n", formatMagic, FormatVersion)
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("objstore: write format: %w", err)
	}
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, "FORMAT"))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("objstore: write format: %w", err)
	}
	return nil
}

// prepareCreate checks that dir is absent or empty and creates it.
func prepareCreate(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("objstore: create in %s: %w (directory not empty)", dir, ErrNotStore)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
