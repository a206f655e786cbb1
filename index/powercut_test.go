package index

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil/crashfs"
)

// TestPowerCutAfterFlush cuts the power (crashfs, strict model) right
// after badger flushed a replayed memtable to a level-0 table: badger
// fsyncs the MANIFEST that lists the table but not the directory that
// names it, so the disk holds a MANIFEST listing a missing table, and
// badger refused to open it ("index is corrupt: 000001.sst: missing").
// Open now drops the table from the MANIFEST (dropUnnamedTables) and
// badger replays the memtable log, which still holds its entries.
func TestPowerCutAfterFlush(t *testing.T) {
	// 1: a new index with committed files, cut.
	fs1 := crashfs.MountT(t, crashfs.Options{})
	// the directory made durable, as the store does (its FORMAT's
	// directory fsync)
	if err := os.Mkdir(filepath.Join(fs1.Dir(), "index"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(fs1.Dir()); err != nil {
		t.Fatal(err)
	}
	db, err := Open(filepath.Join(fs1.Dir(), "index"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprint("file", i)
	}
	ids, err := db.NewFiles(names)
	if err != nil {
		t.Fatal(err)
	}
	fs1.CrashT(t)
	// db is left open, as a process the power cut stopped (a Close
	// would retry its flush on the dead disk for ever).
	img1 := fs1.MaterializeT(t)

	// 2: opened again from that disk, which replays the log into a
	// memtable and flushes it; cut once the table is in the MANIFEST.
	fs2 := crashfs.MountT(t, crashfs.Options{From: img1})
	dir2 := filepath.Join(fs2.Dir(), "index")
	db2, err := Open(dir2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(db2.bdb.Tables()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("badger flushed no table within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	fs2.CrashT(t)
	img2 := fs2.MaterializeT(t)
	if _, err := os.Stat(filepath.Join(img2, "index", "000001.sst")); err == nil {
		t.Log("the table's name was durable: the cut came too late to test the repair")
	}

	// 3: a read-only open asks for a writable one first (it cannot
	// repair); that one repairs, and every committed file is there.
	if _, err := Open(filepath.Join(img2, "index"), Options{ReadOnly: true}); !NeedsRecovery(err) {
		t.Errorf("read-only open after the power cut: %v, want an error NeedsRecovery matches", err)
	}
	db3, err := Open(filepath.Join(img2, "index"), Options{})
	if err != nil {
		t.Fatalf("open after the power cut: %v", err)
	}
	defer db3.Close()
	for i, id := range ids {
		m, err := db3.File(id)
		if err != nil || m.Name != names[i] {
			t.Fatalf("file %d: %+v, %v", id, m, err)
		}
	}
}

// TestPowerCutNewLog cuts the power (crashfs, strict model) after
// commits that went into a memtable log badger started when the first
// filled: badger does not fsync the directory that names the new log,
// so those acknowledged commits were lost with it. A commit that finds
// a new log now fsyncs the directory before it returns (syncNewLogs).
func TestPowerCutNewLog(t *testing.T) {
	fsys := crashfs.MountT(t, crashfs.Options{})
	dir := filepath.Join(fsys.Dir(), "index")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(fsys.Dir()); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	long := string(make([]byte, 900))
	var names []string
	var ids []FileID
	for batch := 0; !exists(dir, memName(2)) || batch%2 == 1; batch++ {
		if batch > 100 {
			t.Fatal("badger started no second memtable log")
		}
		var bn []string
		for i := range 500 {
			bn = append(bn, fmt.Sprintf("%d.%d.%s", batch, i, long))
		}
		got, err := db.NewFiles(bn)
		if err != nil {
			t.Fatal(err)
		}
		names, ids = append(names, bn...), append(ids, got...)
	}
	fsys.CrashT(t)
	img := fsys.MaterializeT(t)
	db2, err := Open(filepath.Join(img, "index"), Options{})
	if err != nil {
		t.Fatalf("open after the power cut: %v", err)
	}
	defer db2.Close()
	for i, id := range ids {
		m, err := db2.File(id)
		if err != nil || m.Name != names[i] {
			t.Fatalf("file %d of %d lost after the power cut: %v", i, len(ids), err)
		}
	}
}
