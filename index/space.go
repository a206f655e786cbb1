package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Space. badger writes its logs through memory maps of sparse files: a
// memtable's log (*.mem) is created 2*memTableSize long with ftruncate,
// a value log (*.vlog) 2*valueLogSize, and each write of an entry is a
// store into the map. On a full file system the page fault of a store
// into a hole cannot allocate a block, and the kernel answers with
// SIGBUS, which Go cannot recover from: the process dies (a mount, with
// every file open in it). Its level tables (*.sst, flushes and
// compactions) are written the same way, into a file badger creates,
// ftruncates and fills in one call (table.CreateTable). A store's live
// files share its file system, so a user filling the disk through the
// mount used to kill the mount at its next index write, and every
// writable open after (opening creates a new log and writes its header
// through the map).
//
// What makes which write safe:
//
//   - Preallocation makes a log's own writes safe, whoever fills the disk
//     and when: before each write transaction, the current memtable log,
//     the current value log and the DISCARD file are fallocated (mode 0:
//     blocks for every hole, the size unchanged) when badger has moved
//     on to new ones since they last were, so a store into their maps
//     never needs a block. A log that cannot be fully allocated refuses
//     the write (a noSpaceError, syscall.ENOSPC to errors.Is). The
//     value log is allocated (2*valueLogSize, 32 MiB) only before a
//     write that holds a value of bigValue or more, the values badger
//     puts there (a huge directory's tree): every other write leaves it
//     untouched. (It was made 1 MiB, badger's least, for all writes to
//     allocate it cheaply; that made 1 MiB badger's largest value, and a
//     snapshot of a directory of 40,000 files failed.)
//   - A free-space check cannot make a store into a hole safe: between
//     the check and the store, anything else on the file system (the
//     mount's own passthrough writers, which the kernel serves without
//     us) may take the last block. So it guards only what preallocation
//     cannot reach: a write transaction is refused unless writeFree bytes
//     are free (statfs, the unprivileged count), enough for what the
//     write may set off inside badger: a rotation to a new memtable log
//     (whose header page and first batch are stored before the next
//     write allocates it), the flush of the full memtable into a level-0
//     table and the compaction that follows. A writable open is refused
//     the same way (it creates and stores into a new memtable log and a
//     new value log, and may flush a replayed memtable). The residual
//     risk is a rotation, flush or compaction running at the moment a
//     concurrent writer takes the last writeFree bytes: once per
//     memTableSize of index writes (hundreds of thousands of entries),
//     not once per write as before.
//   - objstore asks Room before it writes a revision's data, which wants
//     writeFree and half as much again: a put is refused before anything
//     is written, and the commit that follows a put that passed finds
//     writeFree unless a concurrent writer took the margin meanwhile.
//     With a GiB or more to spare, Room trusts a statfs for 50 ms
//     (roomSlack).
//   - Close flushes the memtable and compacts level 0 (table files,
//     through maps): without room for that (closeRoom), a writable index
//     is not closed but left as a killed process leaves it (its log is
//     synced at every commit: the next open replays it, losing nothing),
//     and Close says so. The process must exit before the index is opened
//     again (badger's directory lock).
//
// badger's errors on these paths are not faults: a table it cannot
// create (an error, not a fault: ftruncate of a new file, msync) fails
// the flush, which badger retries every second for ever (db.go,
// flushMemtable), stalling writes once its memtables are full; a
// failed compaction is logged and tried again at the compactors' next
// tick. objstore's segments are written with write(2) and O_DIRECT
// writes, which fail with ENOSPC and are cut off.
//
// A ballast file (released to badger when the disk fills) was rejected:
// the blocks it frees go to whichever writer asks first, and a user's
// writer that filled the disk is asking.
//
// writeFree is 32 MiB, or a 16th of a file system smaller than 512 MiB (a
// test's loop device cannot keep 32 MiB spare: there the guard is
// weaker, preallocation the same); a put wants half as much again.
const writeFree = 4 * memTableSize

// reserve returns the free bytes a write needs on a file system of total
// bytes, or a put when put is set.
func reserve(total int64, put bool) int64 {
	n := min(writeFree, max(total/16, 1<<20))
	if put {
		n += n / 2
	}
	return n
}

// ErrRefused is matched by errors.Is when Commit refused a batch before
// writing any of it (for want of space): the index is as it was, and the
// caller may take back what it did for the batch and go on. A refusal
// part way through a batch split in several transactions is not one.
var ErrRefused = errors.New("refused, nothing written")

// noSpaceError is a write or open refused for want of space on the
// index's file system.
type noSpaceError struct {
	op         string
	dir        string
	free, need int64 // bytes; set unless err says what failed
	err        error
}

func (e *noSpaceError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("index: %s %s: no space left on device: %v", e.op, e.dir, e.err)
	}
	return fmt.Sprintf("index: %s %s: no space left on device (%s free on its file system, needs %s)",
		e.op, e.dir, mib(e.free), mib(e.need))
}

func (e *noSpaceError) Unwrap() error { return syscall.ENOSPC }

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

// freeBytes returns the bytes an unprivileged writer may still allocate
// on dir's file system, and its size; math.MaxInt64 free on one that
// counts no blocks (ramfs: it has no size to fill, only memory).
func freeBytes(dir string) (free, total int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("index: statfs %s: %w", dir, err)
	}
	if st.Blocks == 0 {
		return math.MaxInt64, 0, nil
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, nil
}

// needFree returns a noSpaceError for op unless what it needs (reserve)
// is free on dir's file system.
func needFree(op, dir string, put bool) error {
	_, err := spare(op, dir, put)
	return err
}

// spare is needFree that also returns the bytes free beyond the need.
func spare(op, dir string, put bool) (int64, error) {
	free, total, err := freeBytes(dir)
	if err != nil {
		return 0, err
	}
	need := reserve(total, put)
	if free < need {
		return 0, &noSpaceError{op: op, dir: dir, free: free, need: need}
	}
	return free - need, nil
}

// RoomAfter reports (an error matching syscall.ENOSPC) unless dir's file
// system would keep what a put and its commit need free (Room's
// reserve) once take more bytes are written to it: a restore asks before
// it writes a revision over a live file, which it must then record.
func RoomAfter(op, dir string, take int64) error {
	free, total, err := freeBytes(dir)
	if err != nil {
		return err
	}
	if need := reserve(total, true) + take; free < need {
		return &noSpaceError{op: op, dir: dir, free: free, need: need}
	}
	return nil
}

// A put's Room may answer from a statfs up to roomFor old: one that
// found at least roomSlack free beyond a put's need. That widens by at
// most roomFor the gap there always was between Room and the put's
// commit, in which another writer may take the space (a buffered write
// counts against statfs at once, and fallocate takes a GiB in
// microseconds): the commit's own check (beginWrite, never trusted)
// refuses it then, and a refused commit is taken back (objstore's
// flush). On a file system with less to spare every put asks, and a
// statfs that finds less (or fails) ends any trust. The statfs (a path
// walk) took 0.07 s of the ~0.9 s of CPU that recording a 10,000-file
// untar costs the mount (a profile: BENCHMARKS.md, "M3 untar: where the
// FUSE round trip's time goes"); BenchmarkRoom: 1.9 us asked, 34 ns
// trusted.
const (
	roomSlack = 1 << 30
	roomFor   = 50 * time.Millisecond
)

// roomEpoch is what DB.roomUntil counts from: a monotonic clock, so that
// a step of the wall clock cannot stretch the trust.
var roomEpoch = time.Now()

// Room reports (ErrNoSpace-like, errors.Is syscall.ENOSPC) whether the
// index's file system has room for a put and its commit. objstore asks
// before it writes a revision's data. It may answer from a statfs up to
// roomFor old (see roomSlack).
func (db *DB) Room() error {
	if db.opt.ReadOnly {
		return nil
	}
	now := int64(time.Since(roomEpoch))
	if now < db.roomUntil.Load() {
		return nil
	}
	left, err := spare("write", db.dir, true)
	if err != nil || left < roomSlack {
		db.roomUntil.Store(0)
		return err
	}
	db.roomUntil.Store(now + int64(roomFor))
	return nil
}

// space keeps badger's logs allocated (see Space above).
type space struct {
	mu    sync.Mutex
	mem   int   // the fid of the memtable log last allocated; 0: none yet
	short error // it (or DISCARD) is not fully allocated
	vlog  int   // the fid of the value log last allocated; 0: none yet
}

// bigValue is badger's value threshold (its default, which badgerOptions
// keeps): a value this long or longer is stored in the value log.
const bigValue = 1 << 20

// holdsBig reports whether any of values goes to the value log.
func holdsBig[K comparable](values map[K][]byte) bool {
	for _, v := range values {
		if len(v) >= bigValue {
			return true
		}
	}
	return false
}

// beginBigWrite is beginWrite for a write holding a value of bigValue or
// more: it allocates the current value log too.
func (db *DB) beginBigWrite() error {
	if err := db.beginWrite(); err != nil {
		return err
	}
	return db.space.allocateVlog(db.dir)
}

// beginWrite is called before every write transaction: it refuses it
// unless the logs it stores into are allocated and writeFree bytes are
// free, and notes the write (Close settles, and wants room for the
// memtable's flush).
func (db *DB) beginWrite() error {
	if err := db.space.allocate(db.dir); err != nil {
		return err
	}
	if err := needFree("write", db.dir, false); err != nil {
		return err
	}
	db.wrote.Store(true)
	return nil
}

// allocate fallocates the current logs of dir, when badger has moved on
// to new ones since they last were (their successors exist: badger
// numbers its logs one up), or when they could not be then.
func (s *space) allocate(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem != 0 && s.short == nil && !exists(dir, memName(s.mem+1)) {
		return nil
	}
	s.mem, _ = currentLogs(dir)
	s.short = nil
	for _, name := range []string{memName(s.mem), "DISCARD"} {
		if err := fallocate(filepath.Join(dir, name)); err != nil {
			s.short = &noSpaceError{op: "write", dir: dir, err: err}
			return s.short
		}
	}
	return nil
}

// allocateVlog fallocates the current value log of dir, unless it was
// already.
func (s *space) allocateVlog(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, fid := currentLogs(dir)
	if fid == s.vlog && fid != 0 {
		return nil
	}
	if err := fallocate(filepath.Join(dir, vlogName(fid))); err != nil {
		return &noSpaceError{op: "write", dir: dir, err: err}
	}
	s.vlog = fid
	return nil
}

func memName(fid int) string  { return fmt.Sprintf("%05d.mem", fid) }
func vlogName(fid int) string { return fmt.Sprintf("%06d.vlog", fid) }

func exists(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, name))
	return err == nil
}

// currentLogs returns the fids of the newest memtable log and the newest
// value log in dir, the ones badger writes. Older logs are no longer
// written (a memtable log waits for its flush, an old value log is only
// read).
func currentLogs(dir string) (mem, vlog int) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		num, ext, _ := strings.Cut(n, ".")
		fid, err := strconv.Atoi(num)
		switch {
		case err != nil:
		case ext == "mem" && fid > mem:
			mem = fid
		case ext == "vlog" && fid > vlog:
			vlog = fid
		}
	}
	return mem, vlog
}

// fallocate gives every hole of the file at p a block, keeping its size.
// A file gone meanwhile (flushed, deleted) needs nothing.
func fallocate(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if fi.Size() == 0 || ok && st.Blocks*512 >= fi.Size() {
		return nil
	}
	// A fallocate that fails keeps what it allocated: the disk would be
	// left full, with no room for Close. So it is not tried without room
	// for the holes and the reserve after.
	free, total, err := freeBytes(filepath.Dir(p))
	if err != nil {
		return err
	}
	if holes := fi.Size() - st.Blocks*512; free < holes+reserve(total, false) {
		return fmt.Errorf("allocate %s (%s): %w (%s free)", p, mib(holes), syscall.ENOSPC, mib(free))
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, fi.Size())
	if errors.Is(err, unix.EOPNOTSUPP) {
		return nil // a file system that cannot preallocate: the free-space check is all there is
	}
	if err != nil {
		return fmt.Errorf("allocate %s (%s): %w", p, mib(fi.Size()), err)
	}
	return nil
}

// openRoom refuses a writable open of the index in dir (or of a new one,
// dir not made yet) without writeFree bytes free.
func openRoom(dir string) error {
	at := dir
	for {
		if _, err := os.Stat(at); err == nil || filepath.Dir(at) == at {
			break
		}
		at = filepath.Dir(at)
	}
	if err := needFree("open", at, false); err != nil {
		if e, ok := err.(*noSpaceError); ok {
			e.dir = dir
		}
		return err
	}
	return nil
}

// closeRoom refuses to close a writable index that lacks the room its
// Close may write into (badger's Close flushes the memtable and compacts
// level 0 into the base level, through maps): twice what the memtable
// logs hold (a table of their entries, with its index and filter, is
// no bigger), level 0 and the base level, and a MiB; nothing if there is
// none of those. The index is then left open, as a killed process leaves it: its
// log holds every commit, and the next open replays it.
func (db *DB) closeRoom() error {
	if db.opt.ReadOnly {
		return nil
	}
	need := 2 * memtableBytes(db.dir)
	for _, l := range db.bdb.Levels() {
		if l.Level == 0 || l.IsBaseLevel {
			need += l.Size
		}
	}
	if need == 0 {
		return nil // nothing to flush or compact: Close writes nothing
	}
	need += 1 << 20
	free, _, err := freeBytes(db.dir)
	if err != nil {
		return err
	}
	if free < need {
		err := &noSpaceError{op: "close", dir: db.dir, free: free, need: need}
		return fmt.Errorf("%w; left as is, not closed: the next open replays its log", err)
	}
	return nil
}

// memtableBytes returns the bytes of entries in the memtable logs of dir
// (the memtables a Close flushes).
func memtableBytes(dir string) int64 {
	ents, _ := os.ReadDir(dir)
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".mem") {
			n += logEntries(filepath.Join(dir, e.Name()))
		}
	}
	return n
}

// logHeader is the length of the header of a badger log (a key id and
// an IV).
const logHeader = 20

// logEntries returns how many bytes of entries badger's log at p holds:
// after its header, entries (two bytes of meta, uvarint key length,
// value length and expiry, the key, the value, a CRC-32) up to the first
// without a key (badger zeroes the header after each entry it writes).
// An unreadable log counts as full.
func logEntries(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return memTableSize
	}
	off := logHeader
	for off+2 < len(b) {
		h := off + 2
		var l [3]uint64
		for i := range l {
			v, n := binary.Uvarint(b[h:])
			if n <= 0 {
				return int64(off - logHeader)
			}
			l[i], h = v, h+n
		}
		if l[0] == 0 || l[0]+l[1] > uint64(len(b)) || h+int(l[0]+l[1])+4 > len(b) {
			break
		}
		off = h + int(l[0]+l[1]) + 4
	}
	return int64(max(off-logHeader, 0))
}
