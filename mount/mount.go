package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/objstore"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Defaults of Config.
const (
	// DefaultFsyncInterval: a database fsyncing hundreds of times a
	// second records one revision a second, not hundreds.
	DefaultFsyncInterval = time.Second
	// DefaultShutdownTimeout bounds unmounting and recording what is
	// pending after SIGINT/SIGTERM.
	DefaultShutdownTimeout = 60 * time.Second
)

// liveDir is the store's directory of current file contents.
const liveDir = "live"

// Config describes one mount.
type Config struct {
	Store, MountPoint string
	AllowOther        bool // let other users in (the kernel checks permissions on every mount)
	ReadOnly          bool
	FsyncInterval     time.Duration // 0: DefaultFsyncInterval
	ShutdownTimeout   time.Duration // 0: DefaultShutdownTimeout
	Debug             bool          // go-fuse's request log on stderr
	Logger            *slog.Logger  // nil discards
	// Ready is called once the mount serves requests, with whether the
	// store was created by this mount.
	Ready func(m *Mounted)
	// SnapshotEvery takes an automatic snapshot (named by UTC time,
	// see AutoName) this often; 0: never. KeepSnapshots retires the
	// oldest automatic snapshots beyond this many (0: keep all).
	SnapshotEvery time.Duration
	KeepSnapshots int
	// Exclude leaves the files whose paths match these patterns out of
	// history: no revision at close or fsync, only what snapshots hold
	// (see exclude.go for the patterns and what still records them).
	Exclude []string
	// Busy is called when the shutdown finds the mount busy (a process
	// has a file or directory open in it), before it waits for the mount
	// to be let go of. Closing GiveUp ends that wait early: the changes
	// not recorded then are left to the next mount.
	Busy   func(b BusyMount)
	GiveUp <-chan struct{}

	testRecorder      func(*Recorder) // tests: sees the Recorder
	testNoPassthrough bool            // tests: serve every read through the server
	// testIdle, in tests, replaces idleAfter; testTrimmed sees each
	// idle trim (see trimWhenIdle).
	testIdle    time.Duration
	testTrimmed func(dropped int64)
	// testRevisions, in tests, wraps what snapshots take revisions from.
	testRevisions func(*liveRevs) fs.Revisions
}

// Mounted describes a running mount, for the readiness line.
type Mounted struct {
	Store, MountPoint string
	Created           bool
}

// Run checks the mount point, opens (or creates) and locks the store,
// mounts the live tree, calls cfg.Ready, and serves until ctx ends (then
// it unmounts) or someone else unmounts it; then it records what is
// pending and closes the store. Nothing is created when a check fails.
func Run(ctx context.Context, cfg Config) error {
	cfg = withDefaults(cfg)
	x, err := newExcluder(cfg.Exclude)
	if err != nil {
		return err
	}
	mnt, store, err := checkMountPoint(cfg.MountPoint, cfg.Store)
	if err != nil {
		return err
	}
	if err := checkFUSE(fuseDevice); err != nil {
		return err
	}
	raiseFileLimit()
	created := !exists(filepath.Join(store, "FORMAT"))
	made := store // what a failed first mount removes
	if created && !cfg.ReadOnly {
		// The store's filesystem is checked before any file is made
		// in it: see makeStoreDir.
		top, err := makeStoreDir(store)
		if err != nil {
			_ = os.RemoveAll(top)
			return err
		}
		if top != "" {
			made = top
		}
		if fi, err := os.Lstat(store); err == nil && fi.IsDir() {
			if err := checkXattrs(store, store); err != nil {
				if top != "" {
					_ = os.RemoveAll(top)
				}
				return err
			}
		}
	}
	m, err := open(store, mnt, cfg, x)
	if err != nil {
		if created && errors.Is(err, ErrNoXattrs) {
			_ = os.RemoveAll(made) // a store that cannot be used: leave nothing behind
		}
		return err
	}
	if err := m.mount(mnt, cfg); err != nil {
		err = errors.Join(err, m.close(context.Background()))
		if created {
			_ = os.RemoveAll(made) // leave nothing behind of a failed first mount
		}
		return err
	}
	if err := m.snaps.start(store, cfg); err != nil {
		cfg.Logger.Warn("no control socket: snapshot and stats commands cannot reach this mount", "err", err)
	}
	idle := idleAfter
	if cfg.testIdle > 0 {
		idle = cfg.testIdle
	}
	go m.trimWhenIdle(idle, cfg.testTrimmed)
	if cfg.Ready != nil {
		cfg.Ready(&Mounted{Store: store, MountPoint: mnt, Created: created})
	}
	return m.serve(ctx, cfg)
}

func withDefaults(cfg Config) Config {
	if cfg.FsyncInterval <= 0 {
		cfg.FsyncInterval = DefaultFsyncInterval
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return cfg
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// The mount's text cache budgets (objstore.Config): the mount runs for
// days beside the user's work, and the store's defaults (64+64 MiB) made
// most of a busy mount's live heap (F1, bench/footprint.go). 32 MiB of
// fulltexts still holds the chain root of a file of up to 32 MiB for
// reads of its history; 16 MiB of latest texts is the newest text of
// ~2,000 files of 8 KiB, and a bigger file keeps its own whatever its
// size (objstore's keepOne). A miss costs a rebuild from the segments:
// F1's mount CPU did not move with 16+16 against 32+32 MiB.
const (
	cacheBytes  = 32 << 20
	latestBytes = 16 << 20
)

// running is an open store with its live tree, mounted or not.
type running struct {
	st      *objstore.Store
	sink    *storeSink
	snaps   *snapshotParts
	rec     *Recorder
	jnl     *journal  // nil on a read-only mount
	x       *excluder // paths left out of history (nil: none)
	fsys    *fs.FS
	server  *fuse.Server
	mnt     string
	store   string
	closing chan struct{} // closed when close starts: stops a verify
	// marked: open put mountedFile in the store (unclean.go), which
	// close takes out if it ends cleanly; unclean: it was there already;
	// checking: open queued the redos (and the check of every file
	// after an unclean end), which close's drain of the recorder ends.
	marked, unclean, checking bool
	// stopped: the server has stopped (serve); a detached mount still
	// busy may still change live files.
	stopped bool
}

// open opens the store and builds the live tree over it.
func open(store, mnt string, cfg Config, x *excluder) (*running, error) {
	// FastFulltexts: recording keeps up with a tree of new files; a
	// repack recompresses their fulltexts at the better level.
	st, err := objstore.Open(store, objstore.Config{Create: !cfg.ReadOnly, ReadOnly: cfg.ReadOnly, FastFulltexts: true, Holder: mountedOn + mnt, Logger: cfg.Logger,
		CacheBytes: cacheBytes, LatestBytes: latestBytes})
	if err != nil {
		return nil, err
	}
	if d := st.Damage(); d != nil && cfg.Logger != nil {
		cfg.Logger.Warn("the store is damaged; the mount goes on with what it holds", "err", d)
	}
	m := &running{st: st, mnt: mnt, store: store, x: x, closing: make(chan struct{})}
	live := filepath.Join(store, liveDir)
	var sink Sink = discardSink{} // a read-only mount changes nothing
	var ls *lockedSink
	if !cfg.ReadOnly {
		if err := os.Mkdir(live, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, errors.Join(fmt.Errorf("create %s: %w", live, err), st.Close())
		}
		if err := checkXattrs(live, store); err != nil {
			return nil, errors.Join(err, st.Close())
		}
		if m.sink, err = openStoreSink(st, filepath.Join(store, idsFile), cfg.Logger); err != nil {
			return nil, errors.Join(err, st.Close())
		}
		ls = &lockedSink{sink: m.sink}
		if m.jnl, err = openJournal(filepath.Join(store, journalFile), cfg.Logger); err != nil {
			return nil, errors.Join(err, m.close(context.Background()))
		}
		var restarted bool
		if m.unclean, restarted, err = markMounted(store); err != nil {
			return nil, errors.Join(err, m.close(context.Background()))
		}
		m.marked = true
		sw := &spaceWait{room: st.Room, free: func() (int64, error) { return freeBytes(store) }, closing: m.closing, log: cfg.Logger}
		sink = journalSink{ls: ls, j: m.jnl, rd: &redoer{st: st, ls: ls, j: m.jnl, live: live, log: cfg.Logger, x: x, restarted: restarted}, sw: sw}
	}
	m.rec = NewRecorder(sink, cfg.FsyncInterval, cfg.Logger)
	if js, ok := sink.(journalSink); ok {
		js.sw.resume = func() int { return js.rd.queue(m.rec) }
	}
	if m.sink != nil {
		m.sink.waited = m.rec.Waiting // before the first event: see yields
	}
	if cfg.testRecorder != nil {
		cfg.testRecorder(m.rec)
	}
	m.snaps = newSnapshotParts(st, live, ls, m.jnl, cfg)
	hist, err := m.historyView(store)
	if err != nil {
		return nil, errors.Join(err, m.close(context.Background()))
	}
	m.fsys, err = fs.New(m.snaps.fsConfig(fs.Config{LiveDir: live, Recorder: journaled{Recorder: m.rec, j: m.jnl, x: x}, Logger: cfg.Logger, Passthrough: os.Geteuid() == 0, History: hist, ReadSmallNew: true}))
	if err != nil {
		return nil, errors.Join(err, m.close(context.Background()))
	}
	m.snaps.prepareWith(m.rec, m.fsys)
	if js, ok := sink.(journalSink); ok {
		if n := js.rd.queue(m.rec); n > 0 {
			cfg.Logger.Info("redoing recordings a previous mount left pending", "files", n)
		}
		if m.unclean {
			t0 := time.Now()
			n := js.rd.queueAll(m.rec)
			how := "checked every live file against its history"
			if js.rd.restarted {
				how = "the machine restarted since; hashed every live file against its history"
				go js.rd.trustBoot(m.rec, m.closing, store)
			}
			cfg.Logger.Info("the previous mount did not end cleanly; "+how, "changed", n, "took", time.Since(t0).Round(time.Millisecond))
		}
		m.checking = true
	}
	m.snaps.snap.verify = m.verify
	return m, nil
}

// discardSink records nothing.
type discardSink struct{}

func (discardSink) Record(_ context.Context, ev Event) error {
	if ev.Change != nil {
		ev.Change.Close()
	}
	return nil
}

// mount mounts the live tree on mnt and waits until it serves.
func (m *running) mount(mnt string, cfg Config) error {
	// With AllowOther the callers are other users too, and the kernel
	// checks their permissions, POSIX ACLs included; without, the user
	// who mounted is checked by the live directory (fs.Options).
	opts := fs.Options(cfg.AllowOther)
	opts.Debug = cfg.Debug
	if cfg.ReadOnly {
		opts.Options = append(opts.Options, "ro")
	}
	opts.DirectMount = os.Geteuid() == 0                                   // fusermount3 otherwise
	opts.Logger = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug) // go-fuse diagnostics (orphaned nodes, ...) are not for users
	opts.FsName = m.store                                                  // the CLI finds the store from inside the mount
	opts.RootStableAttr = m.fsys.RootStableAttr()
	server, err := gofs.Mount(mnt, m.fsys.Root(), opts)
	if err != nil {
		return fmt.Errorf("mount on %s: %w", mnt, err)
	}
	m.server = server
	m.snaps.hist.mnt = mnt // a restore writes through the mount
	if server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 || cfg.testNoPassthrough {
		m.fsys.DisablePassthrough()
	}
	return nil
}

// serve waits for ctx or an outside unmount, then shuts down.
func (m *running) serve(ctx context.Context, cfg Config) error {
	unmounted := make(chan struct{})
	go func() { m.server.Wait(); close(unmounted) }()
	select {
	case <-ctx.Done():
	case <-unmounted:
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err := m.unmount(sctx, unmounted, cfg)
	if err == nil {
		// The server has stopped: releases the unmount cut off never come.
		m.fsys.ReleaseOrphans()
		m.stopped = true
	}
	cerr := m.close(sctx)
	if sctx.Err() != nil && errors.Is(err, ErrShutdown) {
		// The deadline passed waiting for the mount: that the recording
		// then had no time left says nothing more.
		cerr = withoutDeadline(cerr)
	}
	return errors.Join(err, cerr)
}

// unmount unmounts (lazily if the mount is busy) and waits until the
// server stopped, so that every release has been reported.
func (m *running) unmount(ctx context.Context, unmounted <-chan struct{}, cfg Config) error {
	select {
	case <-unmounted:
		return nil
	default:
	}
	if err := m.server.Unmount(); err != nil {
		busy := BusyMount{MountPoint: m.mnt, Holders: WithoutSelf(Holders(m.mnt), os.Getpid()), Wait: cfg.ShutdownTimeout}
		if derr := detach(m.mnt); derr != nil {
			return fmt.Errorf("unmount %s: %w (lazy detach: %w)", m.mnt, err, derr)
		}
		if cfg.Busy != nil {
			cfg.Busy(busy)
		}
	}
	select {
	case <-unmounted:
		return nil
	case <-cfg.GiveUp:
		select {
		case <-unmounted: // both at once: it was let go of in time
			return nil
		default:
		}
		return fmt.Errorf("stopped waiting for %s to be let go of (%s)", m.mnt, leftToNext)
	case <-ctx.Done():
		return fmt.Errorf("%w: %s was still in use after %s (%s)", ErrShutdown, m.mnt, cfg.ShutdownTimeout, leftToNext)
	}
}

// leftToNext says what happens to the changes a shutdown could not record:
// the pending journal keeps them for the next mount.
const leftToNext = "changes not recorded yet are recorded by the next mount"

// withoutDeadline drops from a joined error the parts that only say that
// the shutdown's deadline passed.
func withoutDeadline(err error) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var keep []error
	for _, e := range errs {
		if !errors.Is(e, context.DeadlineExceeded) {
			keep = append(keep, e)
		}
	}
	return errors.Join(keep...)
}

// close records what is pending and closes everything, in order.
func (m *running) close(ctx context.Context) error {
	var errs []error
	close(m.closing)
	if m.snaps != nil {
		errs = append(errs, m.snaps.stop())
	}
	if m.rec != nil {
		if err := m.rec.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%w: recording pending revisions: %w", ErrShutdown, err))
		}
	}
	if m.fsys != nil {
		errs = append(errs, m.fsys.Close())
	}
	if m.sink != nil {
		errs = append(errs, m.sink.Close())
	}
	pending := 0 // journal entries a mount must redo (excluded files stay pending)
	if m.jnl != nil {
		for _, p := range m.jnl.entries() {
			if !m.x.excluded(p.path) {
				pending++
			}
		}
		errs = append(errs, m.jnl.close())
	}
	// The mark goes before the store lock: "deltafs umount" returns once
	// the lock is free, and a mount started then makes its own mark,
	// which a removal after the lock would take away.
	return m.st.CloseThen(func(closeErr error) error {
		if !m.marked || errors.Join(append(errs, closeErr)...) != nil || pending != 0 || !m.stopped || !m.checking {
			return errors.Join(errs...)
		}
		// Everything recorded, nothing serves the tree any more, and a
		// check the last unclean end asked for was done: the next
		// mount need not check it. The live files are made durable
		// first, as an unmount of a disk would: a cut after a clean
		// end must not take back what the history holds.
		return errors.Join(syncLive(filepath.Join(m.store, liveDir)), markClean(m.store))
	})
}
