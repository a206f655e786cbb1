package index

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// TestCloseLeavesIndexSettled writes enough to a real index for several
// memtable flushes and a base level above the last, closes it with level
// 0 holding a table and the memtable holding writes (the state that left
// a compaction to the next open before settling), and checks that the
// next open finds nothing to compact and compacts nothing.
func TestCloseLeavesIndexSettled(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 512)
	n := 0
	put := func(batch int) {
		t.Helper()
		db.wrote.Store(true) // the index's own write paths set it
		wb := db.bdb.NewWriteBatch()
		for range batch {
			for i := range val {
				val[i] = byte(rng.Uint32())
			}
			if err := wb.Set(fmt.Appendf(nil, "zz/settle/%09d", rng.Uint32()), val); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if err := wb.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// ~40 MiB: the last level outgrows BaseLevelSize, so the base level
	// is above it and can be pushed over its target.
	for range 40 {
		put(2048)
	}
	// End with a table in level 0 and writes in the memtable.
	for i := 0; db.bdb.Levels()[0].NumTables == 0; i++ {
		if i == 100 {
			t.Fatal("no level-0 table after 100 more batches")
		}
		put(2048)
	}
	put(100)
	before := db.bdb.Levels()
	t.Logf("%d entries; before close: %s", n, levelsString(before))
	t0 := time.Now()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("closed in %s", time.Since(t0))

	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			db.Close()
		}
	}()
	at := db.bdb.Levels()
	t.Logf("at open: %s", levelsString(at))
	if !settled(at) {
		t.Fatalf("the index needs compacting right after it was opened: %s", levelsString(at))
	}
	if base := baseLevel(at); base == len(at)-1 {
		t.Fatalf("the base level is the last (L%d): the test did not write enough to exercise it", base)
	}
	tables := tableIDs(db.bdb)
	// badger's compactors start within a second of opening, then look
	// every 50 ms: a compaction would have replaced tables by now.
	time.Sleep(1500 * time.Millisecond)
	if after := tableIDs(db.bdb); !slices.Equal(tables, after) {
		t.Fatalf("badger compacted after opening a settled index: tables %v, then %v", tables, after)
	}
	var got int
	err = db.bdb.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("zz/settle/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			got++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got == 0 || got > n {
		t.Fatalf("%d entries after reopening, wrote %d (some keys repeat)", got, n)
	}
	// Nothing written since the open: Close has nothing to settle, even
	// where a close after writes would reopen the index to be sure.
	if !db.closeMayUnsettle() {
		t.Fatalf("test set-up: the settled index's close would not reopen it after writes either: %s", levelsString(db.bdb.Levels()))
	}
	r0 := settleReopens.Load()
	closed = true
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if r := settleReopens.Load() - r0; r != 0 {
		t.Fatalf("a close with no writes since the open reopened the index %d times to settle it", r)
	}
}

func TestSettled(t *testing.T) {
	lv := func(level, tables int, size, target int64, score float64) badger.LevelInfo {
		return badger.LevelInfo{Level: level, NumTables: tables, Size: size, TargetSize: target, Score: score}
	}
	for _, c := range []struct {
		name string
		ls   []badger.LevelInfo
		want bool
	}{
		{"empty", nil, true},
		{"quiet", []badger.LevelInfo{lv(0, 1, 8, 0, 0), lv(5, 3, 9, 10, 0), lv(6, 20, 90, 90, 0)}, true},
		{"level 0 full", []badger.LevelInfo{lv(0, levelZeroTables, 16, 0, 1), lv(5, 3, 9, 10, 0), lv(6, 20, 90, 90, 0)}, false},
		{"base over target", []badger.LevelInfo{lv(0, 0, 0, 0, 0), lv(5, 8, 12, 10, 1.2), lv(6, 20, 90, 90, 0)}, false},
		// badger's score leaves out the tables being compacted
		{"base being compacted", []badger.LevelInfo{lv(0, 0, 0, 0, 0), lv(5, 8, 12, 10, 0.6), lv(6, 20, 90, 90, 0)}, false},
		{"last level over its target", []badger.LevelInfo{lv(0, 0, 0, 0, 0), lv(5, 3, 9, 10, 0), lv(6, 20, 95, 90, 0)}, true},
		{"empty level above the base", []badger.LevelInfo{lv(0, 0, 0, 0, 0), lv(1, 0, 0, 0, 0), lv(6, 2, 5, 10, 0)}, true},
	} {
		if got := settled(c.ls); got != c.want {
			t.Errorf("%s: settled = %v, want %v", c.name, got, c.want)
		}
	}
}

func levelsString(ls []badger.LevelInfo) string {
	var s string
	for _, l := range ls {
		if l.NumTables > 0 || l.IsBaseLevel {
			s += fmt.Sprintf(" L%d: %d tables %d KiB (target %d KiB, score %.2f/%.2f, base %v)",
				l.Level, l.NumTables, l.Size>>10, l.TargetSize>>10, l.Score, l.Adjusted, l.IsBaseLevel)
		}
	}
	return s
}

func baseLevel(ls []badger.LevelInfo) int {
	for _, l := range ls {
		if l.IsBaseLevel {
			return l.Level
		}
	}
	return -1
}

func tableIDs(bdb *badger.DB) []uint64 {
	var ids []uint64
	for _, t := range bdb.Tables() {
		ids = append(ids, t.ID)
	}
	slices.Sort(ids)
	return ids
}
