package objstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/deltafs/deltafs/index"
)

// FormatVersion is the on-disk format this package writes; it reads every
// version from oldestFormat on. Version 2 added chunked fulltexts
// (record flag recFlagChunked, chunked.go), version 3 streamed ones
// whose chunk table comes last in their checksum (recFlagLateTable,
// record.go). Version 4 changes no record: it is the mount's live.ids
// in its checksummed form (package mount), which an older build would
// misread as garbage mappings (and its gc then take every live file's
// history for a deleted file's); the mount raises it (RequireFormat)
// before it writes that form. Version 5 added two-base records
// (index.KindP1P2, read through the record graph: graph.go), whose index
// entries an older build could not decode. A store opens as it is and keeps its
// version, readable by older builds, until its first record (or file)
// that needs a newer one: then FORMAT and the index's version are raised
// to it (Store.needFormat), so that an older build refuses the store with
// ErrFormat instead of failing on what it cannot read.
const (
	FormatVersion = 5
	oldestFormat  = 1
)

// FormatMountIDs is the version that introduced the mount's checksummed
// live.ids.
const FormatMountIDs = 4

// RequireFormat raises the store's format to at least v (at most
// FormatVersion), durably, for a caller about to write something in the
// store directory that older builds must not read.
func (s *Store) RequireFormat(v int) error {
	if v > FormatVersion {
		return fmt.Errorf("objstore: format %d: %w", v, ErrFormat)
	}
	if s.cfg.ReadOnly {
		return ErrReadOnly
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.needFormat(v)
}

// The versions that introduced chunked fulltexts, late tables and
// two-base records.
const (
	formatChunked   = 2
	formatLateTable = 3
	formatTwoBase   = 5
)

const formatMagic = "deltafs-store"

var (
	// ErrNotStore: the directory holds no deltafs store (and Create was not set,
	// or it is not empty).
	ErrNotStore = errors.New("not a deltafs store")
	// ErrFormat: the store's format version is unknown or newer than this build.
	ErrFormat = errors.New("unsupported store format")
	// ErrNoIndex: the directory has a FORMAT file but no index/: a store
	// damaged or copied in part. Open creates nothing in it.
	ErrNoIndex = errors.New("index missing")
)

// readFormat parses dir/FORMAT: "deltafs-store\nformat N\n".
func readFormat(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "FORMAT"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("%s: %w (no FORMAT file)", dir, ErrNotStore)
	case errors.Is(err, syscall.ENOTDIR):
		return 0, notDir(dir)
	case err != nil:
		return 0, fmt.Errorf("objstore: %w", err)
	}
	return parseFormat(dir, b)
}

// notDir is the error of a store path that is a file, not a directory.
func notDir(dir string) error {
	return fmt.Errorf("%s: %w (a file, not a directory)", dir, ErrNotStore)
}

// checkStore checks that dir holds a store this build reads, with its
// index, before anything locks or creates in it.
func checkStore(dir string) error {
	if _, err := readFormat(dir); err != nil {
		return err
	}
	return checkIndexDir(dir)
}

// checkIndexDir checks that the store in dir (its FORMAT read) has its
// index directory: badger would create an empty one, and the store would
// then look like one of another format, or empty.
func checkIndexDir(dir string) error {
	idx := filepath.Join(dir, "index")
	st, err := os.Stat(idx)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: %w (no index/ directory: the store is damaged or incomplete)", dir, ErrNoIndex)
	case err != nil:
		return fmt.Errorf("objstore: %w", err)
	case !st.IsDir():
		return fmt.Errorf("%s: %w (index is not a directory)", dir, ErrNoIndex)
	}
	return nil
}

// parseFormat parses the contents of a FORMAT file.
func parseFormat(dir string, b []byte) (int, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 || lines[0] != formatMagic {
		return 0, fmt.Errorf("%s: %w (bad FORMAT file)", dir, ErrNotStore)
	}
	v, err := strconv.Atoi(strings.TrimPrefix(lines[1], "format "))
	if err != nil || !strings.HasPrefix(lines[1], "format ") {
		return 0, fmt.Errorf("%s: %w: unreadable version %q", dir, ErrFormat, lines[1])
	}
	if v < oldestFormat || v > FormatVersion {
		return v, fmt.Errorf("%s: %w: version %d, this build reads %d to %d", dir, ErrFormat, v, oldestFormat, FormatVersion)
	}
	return v, nil
}

// writeFormat writes dir/FORMAT for version v atomically.
func writeFormat(dir string, v int) error {
	text := fmt.Sprintf("%s\nformat %d\n", formatMagic, v)
	if err := WriteFileSync(filepath.Join(dir, "FORMAT"), []byte(text), 0o600); err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	return nil
}

// WriteFileSync replaces the small file at path with b durably: it
// writes b to path+".tmp" (mode perm), fsyncs it, renames it over path
// and fsyncs the directory, so that after a crash path holds its old
// content or b, whole. A failed write leaves no temporary file. Its
// error names path once, then the step that failed and its cause
// ("write /s/FORMAT: create FORMAT.tmp: no space left on device"); the
// cause stays matchable (errors.Is(err, fs.ErrNotExist)).
func WriteFileSync(path string, b []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	step, err := writeTemp(tmp, b, perm)
	if err == nil {
		step, err = "rename "+filepath.Base(tmp), os.Rename(tmp, path)
	}
	if err == nil {
		step, err = "fsync the directory", index.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %s: %w", path, step, bareErr(err))
	}
	return nil
}

// writeTemp writes b to the new file tmp and fsyncs it; on failure it
// says which step failed.
func writeTemp(tmp string, b []byte, perm os.FileMode) (step string, err error) {
	name := filepath.Base(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return "create " + name, err
	}
	step = "write " + name
	_, err = f.Write(b)
	if err == nil {
		step, err = "fsync "+name, f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		step, err = "close "+name, cerr
	}
	return step, err
}

// bareErr strips the operation and path an os error repeats (the caller
// names them) down to its cause.
func bareErr(err error) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// prepareCreate checks that dir is absent or empty and creates it.
func prepareCreate(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return mkdirAllSync(dir, 0o700) // private: see openLocked
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return notDir(dir)
	}
	if err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s: %w (a directory that is not empty: no new store is made in it)", dir, ErrNotStore)
	}
	// An empty directory made before (mkdir, mktemp -d) is made private
	// as a new one is: its live/ holds every live file, readable there
	// without the mount and its permission checks.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("objstore: make the new store %s private: %w", dir, err)
	}
	return nil
}

// mkdirAllSync is index.MkdirAllSync, its errors the store's.
func mkdirAllSync(dir string, perm os.FileMode) error {
	if err := index.MkdirAllSync(dir, perm); err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	return nil
}

// needFormat raises the store's format to at least v before a record
// that needs it is appended: FORMAT first, then the index's version (an
// older build reads FORMAT first). Called with wmu held.
func (s *Store) needFormat(v int) error {
	if s.format >= v {
		return nil
	}
	if err := writeFormat(s.dir, v); err != nil {
		return err
	}
	if err := s.idx.SetFormat(uint64(v)); err != nil {
		return fmt.Errorf("objstore: format %d: %w", v, err)
	}
	s.log.Info("store format raised", "dir", s.dir, "from", s.format, "to", v)
	s.format = v
	return nil
}
