package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// ErrCorrupt is matched by errors.Is when badger's own files (tables,
// manifest) hold bad bytes: the index cannot be trusted to answer, not
// even "not found".
var ErrCorrupt = errors.New("index corrupt")

// CorruptError says which index and which of its files is bad.
type CorruptError struct {
	Dir  string // the index directory
	File string // the file found bad, "" if not known
	Err  error  // badger's error or panic, first line
}

func (e *CorruptError) Error() string {
	where := ""
	if e.File != "" {
		where = e.File + ": "
	}
	return fmt.Sprintf("index %s is corrupt: %s%v", e.Dir, where, e.Err)
}

func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// corrupt builds a CorruptError from badger's error (or a recovered
// panic), keeping its first line that says something: badger's wrapped
// errors carry stack traces.
func corrupt(dir, file string, cause any) error {
	msg := ""
	for _, l := range strings.Split(fmt.Sprint(cause), "\n") {
		if msg = strings.TrimSpace(l); msg != "" {
			break
		}
	}
	if len(msg) > maxCauseLen {
		msg = msg[:maxCauseLen] + "..."
	}
	return &CorruptError{Dir: dir, File: file, Err: errors.New(msg)}
}

// maxCauseLen bounds the cause a CorruptError repeats: the user gets one
// line.
const maxCauseLen = 200

// recoverCorrupt turns a panic of badger's, reading bytes it did not
// check, into a CorruptError in *err. Deferred at every call into badger
// that reads the index (Open, view, update).
func recoverCorrupt(dir string, err *error) {
	if r := recover(); r != nil {
		*err = corrupt(dir, "", fmt.Sprintf("badger panicked: %v", r))
	}
}

// checkFiles verifies what badger would read unchecked, or check in its
// own goroutines (where a panic on bad bytes kills the process): the
// MANIFEST (each change set's CRC), the KEYREGISTRY (its sanity text;
// badger's error on it is a key mismatch), the logs' headers, and every
// table the MANIFEST lists, whole: footer, index checksum, then every
// block's checksum. A new index (no MANIFEST) has nothing to check.
//
// Badger itself could verify tables at open (OnTableRead), but in its
// own goroutines, and it turns a block that fails to read during a Get
// or a scan into "not found" or the scan's end: files would silently go
// missing. After this check, the blocks it reads (OnBlockRead, set in
// badgerOptions) were verified whole at open. Measured (go test -bench
// 'CheckFiles|ColdScan' ./index, 100k entries in 4.6 MB of tables,
// 2 loaded cores): the check reads ~280 MB/s (16 ms per open here);
// OnBlockRead costs nothing measurable on a cold scan of every entry
// (113 against 110 ms, medians of 5, within the noise).
func checkFiles(dir string, opt badger.Options) (err error) {
	defer recoverCorrupt(dir, &err)
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if errors.Is(err, os.ErrNotExist) {
		return manifestLost(dir)
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer f.Close()
	m, _, err := badger.ReplayManifestFile(f, opt.ExternalMagicVersion, opt)
	if err != nil {
		return corrupt(dir, badger.ManifestFilename, err)
	}
	kr, err := badger.OpenKeyRegistry(badger.KeyRegistryOptions{Dir: dir, ReadOnly: true})
	if err != nil {
		return corrupt(dir, badger.KeyRegistryFileName, err)
	}
	kr.Close()
	if err := checkLogHeaders(dir); err != nil {
		return err
	}
	for id, tm := range m.Tables {
		if err := checkTable(dir, id, table.Options{ChkMode: options.OnTableRead, Compression: tm.Compression, BlockSize: opt.BlockSize}); err != nil {
			return err
		}
	}
	return nil
}

// manifestLost reports an index in dir without a MANIFEST but with
// tables or logs as corrupt. Badger writes its MANIFEST (and fsyncs the
// directory) before it makes any log, so only a new index has none; on
// any other it would start a new MANIFEST and delete every table and
// value log the lost one listed: the whole index, for a lost file that a
// copy or a backup could put back.
func manifestLost(dir string) error {
	var found []string
	for _, pat := range []string{"*.sst", "*.vlog", "*.mem"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		found = append(found, m...)
	}
	if len(found) == 0 {
		return nil
	}
	return corrupt(dir, badger.ManifestFilename, fmt.Sprintf("missing, while the index holds %d tables and logs (%s, ...)", len(found), filepath.Base(found[0])))
}

// checkLogHeaders checks the header of each value log and memtable log:
// its first 8 bytes name the encryption key of its entries, 0 here (the
// index is not encrypted); badger fails on another with "Invalid datakey
// id", after logging an error line of its own.
func checkLogHeaders(dir string) error {
	var logs []string
	for _, pat := range []string{"*.vlog", "*.mem"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		logs = append(logs, m...)
	}
	for _, p := range logs {
		b := make([]byte, 8)
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		_, err = io.ReadFull(f, b)
		f.Close()
		if err != nil {
			continue // shorter than a header: badger starts it again
		}
		if k := binary.BigEndian.Uint64(b); k != 0 {
			return corrupt(dir, filepath.Base(p), fmt.Sprintf("header names encryption key %d, and the index is not encrypted", k))
		}
	}
	return nil
}

// checkTable opens table id as badger does, but in this goroutine and
// with every block's checksum verified.
func checkTable(dir string, id uint64, topt table.Options) (err error) {
	name := table.IDToFilename(id)
	defer func() {
		if r := recover(); r != nil {
			err = corrupt(dir, name, fmt.Sprintf("badger panicked: %v", r))
		}
	}()
	f, err := os.Open(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return corrupt(dir, name, "missing (the MANIFEST lists it)")
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer f.Close() // again if badger closed it: os.File allows that
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if err := checkFooter(b); err != nil {
		return corrupt(dir, name, err)
	}
	// The table's bytes on the heap, not mapped: a close of badger's
	// (some of its errors close the file) then unmaps nothing.
	mf := &z.MmapFile{Data: b, Fd: f}
	if _, err := table.OpenTable(mf, topt); err != nil {
		return corrupt(dir, name, err)
	}
	return nil
}

// checkFooter checks that a table's footer (…, index, index length,
// checksum, checksum length) points inside the file: badger reads it
// with y.Check, which exits the process on a bad offset.
func checkFooter(b []byte) error {
	n := uint64(len(b))
	if n < 8 {
		return fmt.Errorf("%d bytes, too short for a table", n)
	}
	ck := uint64(binary.BigEndian.Uint32(b[n-4:]))
	if ck > n-8 {
		return fmt.Errorf("checksum length %d in a table of %d bytes", ck, n)
	}
	il := uint64(binary.BigEndian.Uint32(b[n-8-ck:]))
	if il > n-8-ck {
		return fmt.Errorf("index length %d in a table of %d bytes", il, n)
	}
	return nil
}

// view runs fn in a read-only transaction, a panic of badger's on bad
// bytes turned into a CorruptError.
func (db *DB) view(fn func(txn *badger.Txn) error) (err error) {
	defer recoverCorrupt(db.dir, &err)
	return db.bdb.View(fn)
}

// openBadger is badger.Open after checkFiles, its panics turned into a
// CorruptError.
func openBadger(opt badger.Options) (bdb *badger.DB, err error) {
	if err := checkFiles(opt.Dir, opt); err != nil {
		return nil, err
	}
	defer recoverCorrupt(opt.Dir, &err)
	return badger.Open(opt)
}
