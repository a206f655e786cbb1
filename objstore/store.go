package objstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/deltafs/deltafs/index"
	"github.com/klauspost/compress/zstd"
)

// Store is an open revlog store. Safe for concurrent use.
type Store struct {
	// salvage holds the texts Salvage found for revisions that do not
	// read (salvage.go); rebuilds start from them. Set before a salvage's
	// jobs start, read-only after; nil otherwise.
	salvage map[index.RevID]func() ([]byte, error)

	dir  string
	cfg  Config
	caps Caps
	log  *slog.Logger
	lock *storeLock
	idx  *index.DB
	segs *segments
	enc  *zstd.Encoder // deltas
	senc *zstd.Encoder // small deltas (see smallDelta)
	fenc *zstd.Encoder // fulltexts
	dec  *zstd.Decoder

	cache  *lru[index.RevID] // rebuilt fulltexts
	latest *lru[index.RevID] // newest fulltext of recently written files

	wmu    sync.Mutex // writer: base choice, appends, open batch, file states
	files  map[index.FileID]*index.FileMeta
	ratios map[index.FileID]float64 // last measured fulltext compression ratio
	open   *batch                   // collecting puts for the next group commit
	broken error                    // a failed commit: in-memory state can no longer be trusted
	closed bool
	format int // the index's format version (see needFormat)

	smu sync.Mutex // snapshot creations, deletions and renames take turns

	cmu     sync.Mutex   // held by the group-commit leader
	commits atomic.Int64 // group commits since Open
	puts    atomic.Int64 // puts since Open

	bufs sync.Pool // of *[]byte: text-sized read buffers, see getBuf

	readRecords, readBytes atomic.Int64 // segment records read since Open
	hashedBytes            atomic.Int64 // fulltext bytes hashed by puts and reads since Open
	rebuiltBytes           atomic.Int64 // fulltext bytes rebuilt whole in memory since Open

	pmu         sync.RWMutex // pending (appended, not yet committed) entries
	pending     map[index.RevID]index.Entry
	pendingHash map[uint64][]index.RevID

	// damage is the damage recorded in the store (Damage), under
	// damageMu: two verifies through one mount may clear it at once.
	damageMu sync.Mutex
	damage   error
	// takenBack counts the batches takeBack undid: their revision
	// numbers are given out again, to other texts (TakeBacks).
	takenBack atomic.Uint64

	// hashes holds the content hashes of deferred-hash revisions the
	// store rebuilt (put_sameas.go).
	hashes learnedHashes
}

// Open opens the store in dir, creating it if cfg.Create is set and dir is
// absent or empty. It takes the store lock; Close releases it.
func Open(dir string, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	created := false
	if _, err := readFormat(dir); err != nil {
		if !cfg.Create || !errors.Is(err, ErrNotStore) {
			return nil, err
		}
		if err := prepareCreate(dir); err != nil {
			return nil, err
		}
		created = true
	} else if err := checkIndexDir(dir); err != nil {
		return nil, err
	}
	lock, err := acquireLock(dir, cfg.Holder)
	if err != nil {
		return nil, err
	}
	if err := recoverRepack(dir, cfg.Logger); err != nil { // see repack_shadow.go
		lock.release()
		return nil, err
	}
	s, err := openLocked(dir, cfg, lock, created)
	if err != nil && cfg.ReadOnly && (index.NeedsRecovery(err) || index.FailedOnEmptyLog(err, filepath.Join(dir, "index"))) {
		s, err = recoverThenOpen(dir, cfg, lock)
	}
	if err != nil {
		lock.release()
		return nil, err
	}
	return s, nil
}

// recoverThenOpen opens the store read-only after a writer was killed: a
// read-only open cannot replay the index's half-written log (badger
// refuses, "might result in data loss") nor open the empty log a writer
// killed while creating one leaves, so the store is first opened
// read-write and closed, which runs the recovery a mount or verify runs
// (the index replays its logs, the segments' torn tails are checked and
// cut back to the committed tail). This is safe: lock is held, so no
// other process has the store open, and the replay applies only what was
// committed; what it drops no commit ever returned for.
func recoverThenOpen(dir string, cfg Config, lock *storeLock) (*Store, error) {
	rw := cfg
	rw.ReadOnly = false
	s, err := openLocked(dir, rw, lock, false)
	if err != nil {
		return nil, err
	}
	s.lock = nil // keep the lock for the read-only open
	if err := s.Close(); err != nil {
		return nil, err
	}
	return openLocked(dir, cfg, lock, false)
}

// Damage returns the damage recorded in the store, or nil: a segment
// found shorter than the index says (ErrSegmentShort), by this open or
// an earlier one (damageFile). The records before the damage read as
// usual; verify lists the revisions lost, and a verify that finds the
// store clean clears the mark.
func (s *Store) Damage() error {
	s.damageMu.Lock()
	defer s.damageMu.Unlock()
	return s.damage
}

func openLocked(dir string, cfg Config, lock *storeLock, created bool) (*Store, error) {
	s := &Store{
		dir: dir, cfg: cfg, caps: cfg.Caps(), log: cfg.Logger, lock: lock,
		cache: newLRU[index.RevID](cfg.CacheBytes), latest: newLRU[index.RevID](cfg.LatestBytes),
		files: map[index.FileID]*index.FileMeta{}, ratios: map[index.FileID]float64{}, pending: map[index.RevID]index.Entry{},
		pendingHash: map[uint64][]index.RevID{},
	}
	segDir := filepath.Join(dir, "segments")
	// Private: the segments hold every revision's bytes, whatever the live
	// files' modes say. A store written before they were created 0700 is
	// tightened by its first writable open.
	if err := os.MkdirAll(segDir, 0o700); err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	if !cfg.ReadOnly || created {
		if err := os.Chmod(segDir, 0o700); err != nil {
			return nil, fmt.Errorf("objstore: %w", err)
		}
	}
	idx, err := index.Open(filepath.Join(dir, "index"), index.Options{Logger: cfg.Logger, ReadOnly: cfg.ReadOnly && !created})
	if err != nil {
		return nil, err
	}
	s.idx = idx
	if err := s.init(segDir, created); err != nil {
		idx.Close()
		return nil, err
	}
	// A file larger than the latest budget still keeps its newest text, or
	// every put of it would rebuild its parent from the chain.
	s.latest.keepOne = true
	return s, nil
}

func (s *Store) init(segDir string, created bool) error {
	if err := s.checkIndexFormat(created); err != nil {
		return err
	}
	if created {
		if err := writeFormat(s.dir, FormatVersion); err != nil {
			return err
		}
	}
	tail, err := s.idx.Tail()
	if err != nil {
		return err
	}
	if !s.cfg.ReadOnly {
		damage, err := recoverTail(segDir, tail, s.log.Warn)
		if err != nil {
			return err
		}
		if damage != nil {
			if err := markDamage(s.dir, damage); err != nil {
				return err
			}
		}
	}
	if s.damage, err = readDamage(s.dir); err != nil {
		return err
	}
	s.segs = openSegments(segDir, s.cfg.SegmentSize, tail)
	if s.enc, err = newEncoder(zstd.SpeedDefault, deltaWindow); err != nil {
		return err
	}
	flevel := zstd.SpeedBetterCompression
	if s.cfg.FastFulltexts {
		flevel = zstd.SpeedFastest
	}
	if s.fenc, err = newEncoder(flevel, fullWindow); err != nil {
		return err
	}
	if s.senc, err = newEncoder(zstd.SpeedBetterCompression, 2*smallDelta); err != nil {
		return err
	}
	s.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(2),
		zstd.WithDecoderMaxMemory(maxDecoded), zstd.WithDecoderLowmem(true))
	if err != nil {
		return fmt.Errorf("objstore: zstd: %w", err)
	}
	return nil
}

// Compression levels, measured on 8 MiB of text-like data (fastest,
// default, better, best): 2.14, 1.88, 1.76, 1.62 MB in 42, 49, 75, 250 ms.
// Deltas use the default level (as fast as the fastest, 12% smaller).
// Fulltexts are rare once chains and intermediate snapshots carry the
// history and dominate the store size, so they get the better level.
//
// Every encoder runs one block at a time: puts are serialised while they
// encode, and each concurrent block would cost another set of tables (the
// default level's are ~20 MiB). window, if not 0, caps the encoder's window,
// which also shrinks its tables: the small-delta encoder needs only 128 KiB.
func newEncoder(l zstd.EncoderLevel, window int) (*zstd.Encoder, error) {
	opts := []zstd.EOption{zstd.WithEncoderLevel(l),
		zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderCRC(false)} // every record carries its own xxhash64
	if window > 0 {
		opts = append(opts, zstd.WithWindowSize(window))
	}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: zstd: %w", err)
	}
	return enc, nil
}

// Encoder windows. The encoders live as long as the store, so their
// history buffers and tables are part of every put's footprint: with zstd's
// default windows (8 MiB here) the delta and fulltext encoders held 18 MiB
// after an 8 MiB put. deltaWindow: deltas over 64 KiB are intermediate
// snapshots and rewrites, almost all under 1 MiB, where the window loses
// nothing (S1's store is byte-for-byte the same size). fullWindow: a 2 MiB
// window still sees the repeats of text and code, which are local; on S1's
// 8 MiB text it costs 0.3% of the store (2.607 MB against 2.599 MB) and
// saves 6 MiB of live heap. Live heap of one encoder after an EncodeAll of
// 8 MiB of text and a GC: better level 10.4 MiB with the default window,
// 4.4 MiB with 2 MiB; default level 7.6 MiB, 0.6 MiB with 1 MiB.
const (
	deltaWindow = 1 << 20
	fullWindow  = 2 << 20
)

// maxDecoded bounds what one zstd payload may decompress to.
const maxDecoded = 1 << 34

func (s *Store) checkIndexFormat(created bool) error {
	v, ok, err := s.idx.Format()
	if err != nil {
		return err
	}
	switch {
	case !ok && created:
		s.format = FormatVersion
		return s.idx.SetFormat(FormatVersion)
	case !ok:
		return fmt.Errorf("%s: %w: index has no format version", s.dir, ErrFormat)
	case v < oldestFormat || v > FormatVersion:
		return fmt.Errorf("%s: %w: index format %d, this build reads %d to %d", s.dir, ErrFormat, v, oldestFormat, FormatVersion)
	}
	s.format = int(v)
	return nil
}

// Dir returns the store directory.
func (s *Store) Dir() string { return s.dir }

// Config returns the configuration in effect (defaults filled in).
func (s *Store) Config() Config { return s.cfg }

// Close commits any appended puts still waiting for a group commit, then
// releases the index, the segment files and the lock. Callers must not
// start Puts or Gets concurrently with it.
func (s *Store) Close() error { return s.CloseThen(nil) }

// CloseThen is Close that calls then (if not nil) with the error of
// closing, once everything but the store lock is closed and before the
// lock is let go, and joins its error to the result: a holder's last
// change to the store directory (the mount's clean mark) is done before
// another process may open the store.
func (s *Store) CloseThen(then func(closeErr error) error) error {
	s.cmu.Lock() // as in wait: cmu before wmu; waits for an in-flight commit
	defer s.cmu.Unlock()
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return ErrClosed
	}
	s.closed = true
	open, dirty := s.open, s.segs.takeDirty()
	s.open = nil
	s.wmu.Unlock()
	var errs []error
	if open != nil {
		open.err = s.flush(open, dirty)
		s.unpend(open)
		close(open.done)
		errs = append(errs, open.err)
	}
	errs = append(errs, s.segs.close(), s.idx.Close())
	s.enc.Close()
	s.senc.Close()
	s.fenc.Close()
	s.dec.Close()
	if then != nil {
		errs = append(errs, then(errors.Join(errs...)))
	}
	if s.lock != nil { // nil: recoverThenOpen keeps it
		errs = append(errs, s.lock.release())
	}
	return errors.Join(errs...)
}

// Room reports whether the store's file system has room for a put and
// its commit (index.DB.Room): an error matching syscall.ENOSPC if not.
func (s *Store) Room() error { return s.idx.Room() }

// NewFile allocates a file identity.
func (s *Store) NewFile(name string) (index.FileID, error) {
	if s.cfg.ReadOnly {
		return 0, ErrReadOnly
	}
	ids, err := s.NewFiles([]string{name})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NewFiles allocates a file identity for each name, in one synced index
// transaction (NewFile takes one each). The writer keeps their records
// (a name, no revisions), so that the first put of each does not read
// back from the index what was just written (an untar's puts did, one
// index lookup per new file).
func (s *Store) NewFiles(names []string) ([]index.FileID, error) {
	if s.cfg.ReadOnly {
		return nil, ErrReadOnly
	}
	ids, err := s.idx.NewFiles(names)
	if err != nil {
		return nil, err
	}
	s.wmu.Lock()
	for i, id := range ids {
		if s.files[id] == nil {
			s.files[id] = &index.FileMeta{Name: names[i]}
		}
	}
	s.wmu.Unlock()
	return ids, nil
}

// File returns the committed record of file f (name, revision count).
func (s *Store) File(f index.FileID) (index.FileMeta, error) { return s.idx.File(f) }

// SetName makes name file f's name (index.FileMeta.Name), unless it is
// that already (then it costs one look at the record, often cached). It
// does not wait: the next group commit (or Flush, or Close) writes it,
// so an rm -rf of files that moved costs no commit per file. The mount
// names a file removed from the live tree by the path it left, so that
// a deleted file is found where it was last, also when it moved after
// its last revision; a name lost to a crash leaves the one of its last
// revision.
func (s *Store) SetName(f index.FileID, name string) error {
	s.wmu.Lock()
	err := s.canPut()
	var meta *index.FileMeta
	if err == nil {
		meta, err = s.fileMeta(f)
	}
	if err != nil || meta.Name == name {
		s.wmu.Unlock()
		return err
	}
	meta.Name = name
	s.enqueueFile(f, *meta)
	s.wmu.Unlock()
	return nil
}

// Flush commits whatever waits for the next group commit (the names
// SetName set, puts not yet waited for).
func (s *Store) Flush() error {
	s.wmu.Lock()
	b := s.open
	s.wmu.Unlock()
	if b == nil {
		return nil
	}
	return s.wait(b)
}

// Files calls fn with the committed record of every file, in FileID
// order.
func (s *Store) Files(ctx context.Context, fn func(index.FileID, index.FileMeta) error) error {
	return s.idx.Files(ctx, fn)
}

// Latest returns the entry of file f's newest committed revision; ok is
// false if it has none (never written, or gc removed them all). It is not
// always revision Revs-1 of the file's record: gc leaves gaps.
func (s *Store) Latest(f index.FileID) (e index.Entry, ok bool, err error) { return s.idx.Latest(f) }

// Revisions calls fn with every committed entry of file f, in order.
func (s *Store) Revisions(ctx context.Context, f index.FileID, fn func(index.Entry) error) error {
	return s.idx.Revisions(ctx, f, fn)
}
