package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"google.golang.org/protobuf/proto"
)

// badger (v4.9) does not fsync its directory after every file it makes.
// Its logs and tables are made through ristretto's z.OpenMmapFile,
// which fsyncs the directory only for a file it creates empty, never
// for one it creates at a size, which every log and table is. Two gaps
// follow, each found with the power-cut model of internal/testutil/crashfs
// (strict: a name is durable only once its directory is fsynced):
//
//   - a memtable flush (db.go, handleMemTableFlush) writes and msyncs a
//     level-0 table, then adds it to the MANIFEST, which it fsyncs, and
//     nothing fsyncs the directory: a power cut then leaves a MANIFEST
//     listing a table that is not there, and badger refuses to open
//     ("file does not exist for table"). Compactions do fsync the
//     directory before they change the MANIFEST; only flushes do not.
//     The table's entries are still in the memtable's log: it is deleted
//     only after the MANIFEST change, and that deletion is durable only
//     once the directory is fsynced, which would have made the table's
//     name durable too. dropUnnamedTables takes such tables out of the
//     MANIFEST before badger opens, and badger replays the log;
//   - a new memtable log (*.mem: badger starts one when the memtable
//     fills, inside the commit that fills it) or value log (*.vlog)
//     holds commits before its name is durable: syncNewLogs fsyncs the
//     directory after a commit that finds a new one, before the commit
//     returns.
//
// These are workarounds of badger's defects in deltafs, not patches of
// badger; the README's limitations say what is left.

// dropUnnamedTables takes out of the MANIFEST of the index in dir every
// level-0 table it lists that is missing, when memtable logs are there
// to replay (what a power cut after a memtable flush leaves, see above).
// Anything else missing is left for checkFiles to report as corruption.
// A read-only open (readOnly) changes nothing: it returns an error that
// NeedsRecovery matches, so that the caller opens the index writable
// first, as after a killed writer.
func dropUnnamedTables(dir string, opt badger.Options, log *slog.Logger, readOnly bool) error {
	p := filepath.Join(dir, badger.ManifestFilename)
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(p, flag, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer f.Close()
	m, end, err := badger.ReplayManifestFile(f, opt.ExternalMagicVersion, opt)
	if err != nil {
		return nil // checkFiles reports it
	}
	var missing []uint64
	for id, tm := range m.Tables {
		_, err := os.Lstat(filepath.Join(dir, table.IDToFilename(id)))
		if !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if tm.Level != 0 {
			return nil // not a flush's: corruption, for checkFiles
		}
		missing = append(missing, id)
	}
	if len(missing) == 0 {
		return nil
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "*.mem")); len(logs) == 0 {
		return nil // nothing to replay them from: corruption
	}
	slices.Sort(missing)
	if readOnly {
		return fmt.Errorf("index: %s: level-0 tables %v missing after a power cut, replayed by a writable open: %w",
			dir, missing, badger.ErrTruncateNeeded)
	}
	cs := &pb.ManifestChangeSet{}
	for _, id := range missing {
		cs.Changes = append(cs.Changes, &pb.ManifestChange{Id: id, Op: pb.ManifestChange_DELETE})
	}
	buf, err := proto.Marshal(cs)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	// as badger appends a change set (manifest.go, addChanges), after
	// the valid end it replayed (a torn tail is cut first)
	rec := make([]byte, 8, 8+len(buf))
	binary.BigEndian.PutUint32(rec[0:4], uint32(len(buf)))
	binary.BigEndian.PutUint32(rec[4:8], crc32.Checksum(buf, y.CastagnoliCrcTable))
	rec = append(rec, buf...)
	if err := f.Truncate(end); err != nil {
		return fmt.Errorf("index: repair %s: %w", p, err)
	}
	if _, err := f.WriteAt(rec, end); err != nil {
		return fmt.Errorf("index: repair %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("index: repair %s: %w", p, err)
	}
	if log != nil {
		log.Warn("index: level-0 tables a power cut took before their names were durable dropped from the MANIFEST; their memtable logs are replayed",
			"dir", dir, "tables", missing)
	}
	return nil
}

// syncNewLogs fsyncs the index directory when badger has started a log
// since the last call (see above): called after every commit (update,
// NewFiles, the write batches of holds and trees), before it returns. A stat of the next log's names is all it costs otherwise.
func (db *DB) syncNewLogs() error {
	db.logMu.Lock()
	defer db.logMu.Unlock()
	if db.logMem != 0 && !exists(db.dir, memName(db.logMem+1)) && !exists(db.dir, vlogName(db.logVlog+1)) {
		return nil
	}
	mem, vlog := currentLogs(db.dir)
	if err := SyncDir(db.dir); err != nil {
		return fmt.Errorf("index: fsync %s: %w", db.dir, err)
	}
	db.logMem, db.logVlog = mem, vlog
	return nil
}
