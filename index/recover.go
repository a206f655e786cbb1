package index

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
)

// removeEmptyLogs deletes zero-length badger logs (memtable *.mem and value
// log *.vlog files) in dir. badger creates them (on every open, and as they
// fill) and sizes them right after; a process killed in between leaves an
// empty file that badger then refuses to open ("Create a new file"). An
// empty log holds no writes and nothing points into it, so removing it
// loses nothing; badger itself deletes header-only value logs on open.
func removeEmptyLogs(dir string) error {
	names, err := emptyLogs(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	for _, name := range names {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("index: remove empty log: %w", err)
		}
	}
	return nil
}

// FailedOnEmptyLog reports whether err, returned by a read-only Open of
// the index in dir, names an empty badger log of dir (see
// removeEmptyLogs): badger fails on one ("while opening memtable ...
// truncate"), which a read-write Open removes first.
func FailedOnEmptyLog(err error, dir string) bool {
	if err == nil {
		return false
	}
	names, lerr := emptyLogs(dir)
	if lerr != nil {
		return false
	}
	for _, name := range names {
		if strings.Contains(err.Error(), name) {
			return true
		}
	}
	return false
}

// emptyLogs lists the zero-length *.mem and *.vlog files of dir.
func emptyLogs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		ext := filepath.Ext(e.Name())
		if ext != ".mem" && ext != ".vlog" || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() == 0 {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// NeedsRecovery reports whether err, returned by a read-only Open, is
// badger refusing to replay a log a killed writer left half-written
// ("Log truncate required to run DB"). A read-write Open replays it: it
// applies every transaction whose commit reached the log and drops the
// torn end, which no commit ever returned for (writes are synced), so
// nothing committed is lost. badger wraps the error with %+v rather than
// %w, so only its text identifies it.
func NeedsRecovery(err error) bool {
	return err != nil && strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error())
}
