package objstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrLocked is matched by errors.Is when another process (or another Open in
// this process) holds the store lock.
var ErrLocked = errors.New("store is locked")

// LockError names who holds the lock, as written into dir/LOCK.
type LockError struct {
	Dir    string
	PID    string // holder's pid as recorded, "" if unknown
	Holder string // e.g. the mount point, "" if none recorded
}

func (e *LockError) Error() string {
	who := "another process"
	if e.PID != "" {
		who = "pid " + e.PID
	}
	if e.Holder != "" {
		who += " (" + e.Holder + ")"
	}
	return fmt.Sprintf("store %s is locked by %s", e.Dir, who)
}

func (e *LockError) Unwrap() error { return ErrLocked }

// storeLock is an flock(2) on dir/LOCK. flock locks belong to the open file
// description, so a second Open in the same process conflicts too. Read-only
// opens take the same exclusive lock: simpler, and repack/verify never need
// to run next to a mount.
type storeLock struct{ f *os.File }

func acquireLock(dir, holder string) (*storeLock, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("objstore: open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, readHolder(dir, path)
		}
		return nil, fmt.Errorf("objstore: lock %s: %w", path, err)
	}
	if err := writeHolder(f, holder); err != nil {
		f.Close()
		return nil, err
	}
	return &storeLock{f: f}, nil
}

func writeHolder(f *os.File, holder string) error {
	text := fmt.Sprintf("pid %d\n", os.Getpid())
	if holder != "" {
		text += "holder " + strings.ReplaceAll(holder, "\n", " ") + "\n"
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("objstore: write lock: %w", err)
	}
	if _, err := f.WriteAt([]byte(text), 0); err != nil {
		return fmt.Errorf("objstore: write lock: %w", err)
	}
	return nil
}

func readHolder(dir, path string) error {
	e := &LockError{Dir: dir}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "pid "); ok {
			e.PID = v
		}
		if v, ok := strings.CutPrefix(line, "holder "); ok {
			e.Holder = v
		}
	}
	return e
}

func (l *storeLock) release() error {
	// Leave the file in place: removing it would race with a new locker.
	_ = l.f.Truncate(0)
	return l.f.Close()
}

// Holder returns who holds the store lock of dir (a *LockError, matching
// ErrLocked), or nil when nobody does: "deltafs umount" waits with it for
// the mount process to let the store go. It probes with a shared flock,
// taken and let go at once, and never writes the lock file; a process
// opening the store at that very instant fails as against any holder.
func Holder(dir string) error {
	path := filepath.Join(dir, "LOCK")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("objstore: open lock: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return readHolder(dir, path)
	} else if err != nil {
		return fmt.Errorf("objstore: lock %s: %w", path, err)
	}
	return nil // closing f lets the shared lock go
}

// LeftBy returns the pid that dir's lock file names when nobody holds the
// lock: a holder that lets the store go empties the file (release), so a
// pid left in it is a holder that died holding the lock (killed,
// crashed). "" when the lock is held or the file names nobody.
func LeftBy(dir string) string {
	if Holder(dir) != nil {
		return ""
	}
	if e, ok := readHolder(dir, filepath.Join(dir, "LOCK")).(*LockError); ok {
		return e.PID
	}
	return ""
}
