package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// ErrNotFound is matched by errors.Is when a file or revision does not exist.
var ErrNotFound = errors.New("index: not found")

// Options configure Open.
type Options struct {
	// Logger receives badger's own log lines; nil silences them.
	Logger   *slog.Logger
	ReadOnly bool
}

// DB is the badger-backed index. Safe for concurrent use.
type DB struct {
	bdb      *badger.DB
	dir      string
	opt      Options
	alloc    sync.Mutex // serialises NewFile's allocations (not its commits)
	nextFile FileID     // next FileID to allocate, 0 until read; with alloc held

	holdMu sync.Mutex
	holds  *holdStamp // the stamp the hold rows are known valid for; nil: not (holds_stamp.go)

	wrote atomic.Bool // a write was attempted since Open: Close settles (settle.go)

	logMu           sync.Mutex
	logMem, logVlog int   // the newest logs when the directory was last fsynced (powercut.go)
	space           space // keeps badger's logs allocated (space.go)
	// roomUntil: Room needs no statfs before this time (ns since roomEpoch; space.go)
	roomUntil atomic.Int64
}

// Memory settings. The mount runs for days next to the user's work, so the
// index keeps its footprint small: 8 MiB memtables (badger's default is 64),
// two of them, and small block/index caches. Index values are tens of bytes,
// so this still holds several hundred thousand entries before a flush.
const (
	memTableSize   = 8 << 20
	numMemtables   = 2
	blockCacheSize = 16 << 20
	indexCacheSize = 8 << 20
	// valueLogSize bounds a value (badger refuses a longer one): a
	// directory's tree is one value, 3.2 MB for 40,000 entries of
	// 30-byte names, so 16 MiB holds a directory of about 200,000. Only
	// values of bigValue or more go to the value log, which is allocated
	// (space.go: 32 MiB) before a write that holds one.
	valueLogSize = 16 << 20
	// levelZeroTables level-0 tables start a compaction into the base
	// level.
	levelZeroTables = 2
)

// Open opens (or creates) the index in dir.
func Open(dir string, opt Options) (*DB, error) {
	if !opt.ReadOnly {
		if err := removeEmptyLogs(dir); err != nil {
			return nil, err
		}
		if err := openRoom(dir); err != nil {
			return nil, err
		}
	}
	if err := dropUnnamedTables(dir, badgerOptions(dir, opt), opt.Logger, opt.ReadOnly); err != nil { // powercut.go
		return nil, err
	}
	bdb, err := openBadger(badgerOptions(dir, opt)) // corrupt.go
	if errors.Is(err, ErrCorrupt) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", dir, err)
	}
	db := &DB{bdb: bdb, dir: dir, opt: opt}
	if err := db.trustHolds(); err != nil {
		bdb.Close()
		return nil, fmt.Errorf("index: open %s: hold rows: %w", dir, err)
	}
	return db, nil
}

// badgerOptions are the badger options of an index in dir.
func badgerOptions(dir string, opt Options) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(slogAdapter{opt.Logger}).
		WithSyncWrites(true). // an entry is durable when Commit returns
		WithReadOnly(opt.ReadOnly).
		WithMemTableSize(memTableSize).
		WithNumMemtables(numMemtables).
		WithNumLevelZeroTables(levelZeroTables).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(blockCacheSize).
		WithIndexCacheSize(indexCacheSize).
		WithValueLogFileSize(valueLogSize).
		WithNumCompactors(2).
		WithCompactL0OnClose(!opt.ReadOnly). // see settle.go
		WithMetricsEnabled(false).
		WithChecksumVerificationMode(options.OnBlockRead) // see corrupt.go
}

// Close closes the database. A writable one is left settled (settle.go):
// the next process to open it has nothing to compact.
func (db *DB) Close() error {
	reopen, end := false, time.Now().Add(settleWait)
	if err := db.closeRoom(); err != nil {
		return err
	}
	if !db.opt.ReadOnly && db.wrote.Load() {
		db.waitSettled(end)
		reopen = db.closeMayUnsettle()
	}
	if err := db.bdb.Close(); err != nil {
		return fmt.Errorf("index: close: %w", err)
	}
	if reopen {
		return settle(db.dir, db.opt, end)
	}
	return nil
}

// maxRetries bounds update's retries on conflicts. Conflicts only arise
// between concurrent NewFile calls and group commits; a handful suffices.
const maxRetries = 16

// update runs fn in a read-write transaction and commits it, retrying on
// badger.ErrConflict. It is the only place that commits.
func (db *DB) update(fn func(txn *badger.Txn) error) (err error) {
	defer recoverCorrupt(db.dir, &err)
	if err = db.beginWrite(); err != nil {
		return err
	}
	for range maxRetries {
		err = db.bdb.Update(fn)
		if err == nil {
			return db.syncNewLogs() // powercut.go
		}
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("index: gave up after %d conflicts: %w", maxRetries, err)
}

func getValue(txn *badger.Txn, key []byte) ([]byte, error) {
	it, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return it.ValueCopy(nil)
}

// Format returns the recorded format version; ok is false for a new index.
func (db *DB) Format() (v uint64, ok bool, err error) {
	err = db.view(func(txn *badger.Txn) error {
		b, err := getValue(txn, keyFormat)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var n int
		v, n = binary.Uvarint(b)
		if n <= 0 || n != len(b) {
			return fmt.Errorf("%w: format value", ErrDecode)
		}
		ok = true
		return nil
	})
	return v, ok, err
}

// SetFormat records the format version.
func (db *DB) SetFormat(v uint64) error {
	return db.update(func(txn *badger.Txn) error {
		return txn.Set(keyFormat, binary.AppendUvarint(nil, v))
	})
}

// NewFile allocates a FileID and records its name. The counter lives in
// memory once read, and each allocation is a blind write (no read, so no
// conflicts) committed in allocation order, so that the stored counter
// only grows; concurrent calls share badger's write batches. Each call is
// still a synced transaction of its own (badger syncs its log once per
// transaction): NewFiles makes many files in one.
func (db *DB) NewFile(name string) (FileID, error) {
	ids, err := db.NewFiles([]string{name})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NewFiles is NewFile for every name at once: the files get FileIDs in
// the order of names, consecutive unless another NewFiles takes some
// between two of its transactions (the mount's callers hold its sink's
// lock), in one transaction when they fit in
// one (newFilesChunk names at most, fewer if badger says the transaction
// is too big), else in as many as they need, each durable on its own. An
// untar's recording makes hundreds of files at a time, and a synced
// transaction each measured as most of its time (one msync of badger's
// log per transaction); a snapshot after 20,000 new excluded files makes
// them all at once. A crash between two transactions leaves the first's
// files allocated and unused: files with no revisions, which nothing
// lists.
func (db *DB) NewFiles(names []string) ([]FileID, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ids := make([]FileID, 0, len(names))
	chunk := newFilesChunk
	for len(ids) < len(names) {
		part := names[len(ids):]
		part = part[:min(len(part), chunk)]
		first, err := db.newFiles(part)
		if errors.Is(err, badger.ErrTxnTooBig) && len(part) > 1 {
			chunk = len(part) / 2
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("index: new file %q: %w", part[0], err)
		}
		for i := range part {
			ids = append(ids, first+FileID(i))
		}
	}
	if err := db.syncNewLogs(); err != nil { // powercut.go
		return nil, err
	}
	return ids, nil
}

// newFilesChunk bounds the files NewFiles makes in one transaction.
const newFilesChunk = 4096

// newFiles makes a file for each name in one transaction and returns the
// first one's FileID; the rest follow it.
func (db *DB) newFiles(names []string) (FileID, error) {
	db.alloc.Lock()
	if db.nextFile == 0 {
		if err := db.loadNextFile(); err != nil {
			db.alloc.Unlock()
			return 0, err
		}
	}
	if err := db.beginWrite(); err != nil {
		db.alloc.Unlock()
		return 0, err
	}
	first := db.nextFile
	txn := db.bdb.NewTransaction(true)
	var err error
	for i, name := range names {
		meta, _ := (&FileMeta{Name: name}).MarshalBinary()
		if err = txn.Set(fileKey(first+FileID(i)), meta); err != nil {
			break
		}
	}
	next := first + FileID(len(names))
	if err == nil {
		err = txn.Set(keyNextFile, binary.BigEndian.AppendUint64(nil, uint64(next)))
	}
	done := make(chan error, 1)
	if err != nil {
		txn.Discard()
		done <- err
	} else {
		db.nextFile = next
		txn.CommitWith(func(err error) { done <- err })
	}
	db.alloc.Unlock()
	return first, <-done
}

// loadNextFile reads the stored counter, with alloc held.
func (db *DB) loadNextFile() error {
	return db.view(func(txn *badger.Txn) error {
		db.nextFile = 1
		b, err := getValue(txn, keyNextFile)
		switch {
		case err == nil && len(b) == 8:
			db.nextFile = FileID(binary.BigEndian.Uint64(b))
		case err == nil:
			return fmt.Errorf("%w: next file id", ErrDecode)
		case !errors.Is(err, ErrNotFound):
			return err
		}
		return nil
	})
}

// File returns the record of file f.
func (db *DB) File(f FileID) (FileMeta, error) {
	var m FileMeta
	err := db.view(func(txn *badger.Txn) error {
		b, err := getValue(txn, fileKey(f))
		if err != nil {
			return err
		}
		return m.UnmarshalBinary(b)
	})
	if err != nil {
		return m, fmt.Errorf("index: file %d: %w", f, err)
	}
	return m, nil
}

// Entry returns the entry of revision id.
func (db *DB) Entry(id RevID) (Entry, error) {
	var e Entry
	err := db.view(func(txn *badger.Txn) error {
		b, err := getValue(txn, revKey(id))
		if err != nil {
			return err
		}
		return e.UnmarshalBinary(b)
	})
	if err != nil {
		return e, fmt.Errorf("index: revision %v: %w", id, err)
	}
	return e, nil
}

// Tail returns the committed segment tail (zero for an empty store).
func (db *DB) Tail() (Tail, error) {
	var t Tail
	err := db.view(func(txn *badger.Txn) error {
		b, err := getValue(txn, keyTail)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		t, err = decodeTail(b)
		return err
	})
	if err != nil {
		return t, fmt.Errorf("index: tail: %w", err)
	}
	return t, nil
}

// ctxErr lets long scans stop early.
func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}
