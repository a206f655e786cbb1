package index

import (
	"fmt"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Settling. badger compacts in the background, when level 0 holds
// levelZeroTables tables or a deeper level outgrows its target, and it
// flushes the memtable into a new level-0 table when it closes, after its
// compactors have stopped. Left alone, a writer that closes leaves the
// compactions its last writes call for to the next process that opens the
// index: a mount of a store just built then rewrote tables for its first
// second or two, taking 0.7 s of CPU and growing by 180 MiB (compaction's
// table builders hold whole tables, and their pool keeps them for seconds
// after), in the middle of whatever it was asked first (issue 5, H1).
//
// So a writable DB is closed settled, leaving nothing to compact:
//   - Close first waits for the compactions the running compactors have
//     to do;
//   - badger then flushes the memtable into level 0 and, with
//     CompactL0OnClose, compacts level 0 into the base level;
//   - if that may have pushed the base level over its target
//     (closeMayUnsettle), Close opens the index again, waits for the
//     compactors to bring every level under its target, and closes it
//     with an empty memtable, which flushes nothing.
//
// The cost falls on the writer that closes (the mount at unmount, repack,
// a CLI command that wrote), once for what it wrote, rather than on the
// next reader's first request; a writable DB that wrote nothing since it
// was opened closes as it is (its compactions, if any, are the ones its
// opening started). Read-only opens never compact and so never
// settle. The waits together take at most settleWait (the mount closes
// the store within its shutdown deadline); giving up loses nothing but the
// quiet start. A compaction of the 131 MB index of H1's larger store takes
// about 2 s.
const settleWait = 30 * time.Second

// settleReopens counts settle's reopens (for tests).
var settleReopens atomic.Int64

// settlePoll is how often waitSettled looks at the levels. badger's
// compactors look every 50 ms (and wait up to a second after opening).
const settlePoll = 20 * time.Millisecond

// settled reports whether badger's compactors have nothing to do on
// levels ls, and none running: level 0 holds fewer than
// levelZeroTables tables (counting those being compacted) and every
// other level but the last (never compacted for size) is under its
// target. The sizes are whole, with the tables being
// compacted: badger's own scores leave those out, so a level being
// compacted would look settled until its compaction ends, and closing
// then left the level over its target. A level over its target is
// always compacted in the end (badger picks the level below first when
// that one is fuller), so waiting for this ends.
func settled(ls []badger.LevelInfo) bool {
	for i, l := range ls {
		switch {
		case l.Level == 0 && l.NumTables >= levelZeroTables:
			return false
		case l.Level > 0 && i < len(ls)-1 && l.Size >= l.TargetSize && l.Size > 0:
			return false
		}
	}
	return true
}

// waitSettled waits until the levels are settled or the time is end; it
// reports whether they are.
func (db *DB) waitSettled(end time.Time) bool {
	for !settled(db.bdb.Levels()) {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(settlePoll)
	}
	return true
}

// closeMayUnsettle reports whether closing now may leave work for the
// next open: more than one level-0 table (the close compacts only the
// first run of overlapping ones), or a base level that the memtable's
// flush (at most memTableSize) and level 0 could push over its target.
func (db *DB) closeMayUnsettle() bool {
	ls := db.bdb.Levels()
	if len(ls) == 0 {
		return false
	}
	if ls[0].NumTables > 1 {
		return true
	}
	for _, l := range ls[1 : len(ls)-1] { // the last level is never compacted for size
		if l.IsBaseLevel {
			return l.Size+ls[0].Size+memTableSize >= l.TargetSize
		}
	}
	return false
}

// settle opens the closed writable index in dir, waits for its
// compactions (until end at most) and closes it again.
func settle(dir string, opt Options, end time.Time) error {
	if err := openRoom(dir); err != nil {
		return nil // settling is worth no risk of a fault (space.go)
	}
	settleReopens.Add(1)
	bdb, err := badger.Open(badgerOptions(dir, opt))
	if err != nil {
		return fmt.Errorf("index: settle %s: %w", dir, err)
	}
	db := &DB{bdb: bdb, dir: dir, opt: opt}
	if !db.waitSettled(end) && opt.Logger != nil {
		opt.Logger.Warn("index: closing with compactions pending", "dir", dir)
	}
	if err := bdb.Close(); err != nil {
		return fmt.Errorf("index: settle %s: close: %w", dir, err)
	}
	return nil
}
