package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// From a path to a store file. A live file's history is two steps away:
// its live FileID (the xattr fs.XattrID of STORE/live/PATH, which travels
// with the inode through renames and atomic saves) and the store's map
// from live ids to store FileIDs (live.ids, see ids_file.go). Both are
// the mount's facts (objstore knows nothing of paths, fs nothing of the
// store), so the mapping lives here:
//
//   - in a mount, storeFile asks the running mount's sink, after the
//     recorder has recorded every change of that file closed before the
//     call (Recorder.waitHistory);
//   - offline, storeFileOffline reads live.ids (no recorder runs).
//
// Paths are relative to the tree root, slash-separated (the mount point
// in a mount, STORE/live offline); cleanRel refuses one that leaves it.

// ErrNoHistory matches a live file with no revision in the store: never
// recorded (it kept no FileID, or its changes were never written through
// a mount) or the path names no regular file. It wraps index.ErrNotFound.
var ErrNoHistory error = &kindError{msg: "no recorded history", kind: index.ErrNotFound}

// kindError is an error with its own message that matches kind.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// notFoundf formats a message matching index.ErrNotFound.
func notFoundf(format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: index.ErrNotFound}
}

// ErrNeedRev matches a restore of a live file that names no revision:
// only a deleted file's restore takes its newest by default.
var ErrNeedRev = errors.New("no revision given (only a deleted file is restored from its newest by default)")

// ErrIsDir matches a history request for a directory.
var ErrIsDir = errors.New("is a directory")

// cleanRel returns rel cleaned and relative to the tree root, or an error
// if it leaves the tree or names the root.
func cleanRel(rel string) (string, error) {
	if up := path.Clean(filepath.ToSlash(rel)); up == ".." || strings.HasPrefix(up, "../") {
		return "", fmt.Errorf("%s: leaves the tree: %w", rel, ErrNoHistory)
	}
	c := path.Clean("/" + filepath.ToSlash(rel))[1:]
	if c == "" {
		return "", fmt.Errorf("/: %w", ErrIsDir)
	}
	for _, v := range []string{".snapshots", fs.HistoryName} {
		// The view directories themselves, and a snapshot's directory,
		// are directories: the exit code a directory gets, not "no
		// history".
		if sub, in := strings.CutPrefix(c, v+"/"); c == v || in && v == ".snapshots" && !strings.Contains(sub, "/") {
			return "", fmt.Errorf("%s: %w (a view of the store, not a live file)", rel, ErrIsDir)
		} else if _, live, snap := strings.Cut(sub, "/"); in && snap && v == ".snapshots" {
			return "", fmt.Errorf("%s: inside a snapshot, not a live file: %w (log the live path %s for its history)", rel, ErrNoHistory, live)
		} else if in {
			return "", fmt.Errorf("%s: inside %s, not a live file: %w", rel, v, ErrNoHistory)
		}
	}
	return c, nil
}

// liveFile is a path of the live tree with its live identity.
type liveFile struct {
	Rel  string    // cleaned, relative to the tree root
	Path string    // the file in STORE/live
	ID   fs.FileID // zero if the file has none
	Ino  uint64    // live inode number
}

// openLiveFile resolves rel under the live directory live: a regular
// file (not followed if a symlink) and its FileID.
func openLiveFile(live, rel string) (liveFile, error) {
	c, err := cleanRel(rel)
	if err != nil {
		return liveFile{}, err
	}
	lf := liveFile{Rel: c, Path: filepath.Join(live, filepath.FromSlash(c))}
	// The inode and the FileID from one descriptor, opened with no
	// symlink on the way (beneath.go): a user's symlink swapped in could
	// otherwise pair one file's inode with another's history, or lead a
	// restore to another user's file (reviews).
	f, err := openBeneath(live, c, unix.O_PATH, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return lf, &kindError{msg: c + ": no such file", kind: errNoLiveFile}
	case errors.Is(err, syscall.ELOOP):
		return lf, fmt.Errorf("%s: a symlink on the way (the path must name the file itself): %w", c, ErrNoHistory)
	case err != nil:
		return lf, err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return lf, err
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return lf, fmt.Errorf("%s: %w", c, ErrIsDir)
	case syscall.S_IFREG:
	default:
		return lf, fmt.Errorf("%s: not a regular file: %w", c, ErrNoHistory)
	}
	lf.Ino = st.Ino
	var id fs.FileID // through its /proc/self/fd link: an O_PATH descriptor takes no fgetxattr
	if n, err := unix.Getxattr(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), fs.XattrID, id[:]); err == nil && n == len(id) {
		lf.ID = id
	} else if err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP) {
		return lf, fmt.Errorf("%s: read file id: %w", lf.Path, err)
	}
	return lf, nil
}

// readFileID returns the FileID of the live file at p, or the zero one
// if it has none.
func readFileID(p string) (fs.FileID, error) {
	var id fs.FileID
	n, err := unix.Lgetxattr(p, fs.XattrID, id[:])
	switch {
	case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP):
		return fs.FileID{}, nil
	case err != nil:
		return fs.FileID{}, fmt.Errorf("%s: read file id: %w", p, err)
	case n != len(id):
		return fs.FileID{}, nil
	}
	return id, nil
}

// storeFileOf maps a live FileID to its store file in a mount: it first
// waits until rec has recorded every change of that file closed before
// the call, then asks the sink. A file with no store identity gives
// ErrNoHistory.
func storeFileOf(ctx context.Context, rec *Recorder, ls *lockedSink, id fs.FileID) (index.FileID, error) {
	if id.IsZero() || ls == nil {
		return 0, ErrNoHistory
	}
	if rec != nil {
		if err := rec.waitHistory(ctx, id); err != nil {
			return 0, fmt.Errorf("record pending changes: %w", err)
		}
	}
	fid, ok := ls.sink.storeID(id)
	if !ok {
		return 0, ErrNoHistory
	}
	return fid, nil
}

// storeFileOffline maps rel to its store file in the unmounted store dir.
func storeFileOffline(dir, rel string) (liveFile, index.FileID, error) {
	lf, err := openLiveFile(filepath.Join(dir, liveDir), rel)
	if err != nil {
		return lf, 0, err
	}
	ids, err := readIDs(dir)
	if err != nil {
		return lf, 0, err
	}
	fid, ok := ids[lf.ID]
	if !ok || lf.ID.IsZero() {
		return lf, 0, fmt.Errorf("%s: %w", lf.Rel, ErrNoHistory)
	}
	return lf, fid, nil
}
