package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/mount"
	"github.com/deltafs/deltafs/objstore"
	"github.com/spf13/cobra"
)

// newMountCmd builds "deltafs mount".
func newMountCmd() *cobra.Command {
	var cfg mount.Config
	cmd := &cobra.Command{
		Use:   "mount [flags] STORE MOUNTPOINT",
		Short: "Mount the live tree of STORE on MOUNTPOINT, recording every revision",
		Long: `Mount the store STORE on the empty directory MOUNTPOINT and stay in the
foreground until unmounted. STORE is created when it does not exist (or
is an empty directory). Every file closed after a change, or fsynced, is
recorded as a revision in STORE.

Ctrl-C (SIGINT) or SIGTERM records every pending revision and unmounts;
so does "deltafs umount MOUNTPOINT" from another shell. A busy mount (a
file or directory open in it) is detached and waited for, up to
--shutdown-timeout, saying which processes hold it; Ctrl-C again stops
waiting (the next mount records what was left). A store can be mounted
once at a time: a second mount fails naming the first.`,
		Example: `  deltafs mount ~/work.dfs ~/work
  deltafs mount --snapshot-every 1h --keep-snapshots 48 ~/work.dfs ~/work
  deltafs mount --exclude '*.swp' --exclude node_modules ~/work.dfs ~/work
  deltafs mount --read-only ~/work.dfs /mnt/work`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkMountFlags(cfg); err != nil {
				return err
			}
			cfg.Store, cfg.MountPoint = args[0], args[1]
			return runMount(cmd, cfg)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&cfg.AllowOther, "allow-other", false, "let other users use the mount (the kernel checks their permissions, POSIX ACLs included, as it checks yours)")
	f.BoolVar(&cfg.ReadOnly, "read-only", false, "mount read-only; the store must exist")
	f.DurationVar(&cfg.FsyncInterval, "fsync-interval", mount.DefaultFsyncInterval, "record at most one revision per `DURATION` for a file fsynced again and again (0: the default)")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", mount.DefaultShutdownTimeout, "give up unmounting and recording after `DURATION` (0: the default)")
	f.DurationVar(&cfg.SnapshotEvery, "snapshot-every", 0, "take an automatic snapshot (named auto-<UTC time>) every `DURATION`; 0: never")
	f.IntVar(&cfg.KeepSnapshots, "keep-snapshots", 0, "with --snapshot-every, keep only the newest `N` automatic snapshots (0: keep all); snapshots you name are never retired")
	f.StringArrayVar(&cfg.Exclude, "exclude", nil, "leave files matching `PATTERN` out of history (no revision when closed or fsynced; snapshots still hold them): a name anywhere (*.swp, node_modules) or, with a slash, a path from the root (build/*.o); repeatable")
	f.BoolVar(&cfg.Debug, "debug", false, "log every FUSE request on stderr")
	return cmd
}

// checkMountFlags refuses, before anything is created or mounted, the
// flag values that mean nothing: a bad --exclude pattern, a negative
// duration or count, automatic
// snapshots on a read-only mount (which takes none), and --keep-snapshots
// without --snapshot-every (only automatic snapshots are retired). Zero
// keeps its meaning: the default interval and timeout, no automatic
// snapshots, keep them all.
func checkMountFlags(cfg mount.Config) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--fsync-interval", cfg.FsyncInterval}, {"--shutdown-timeout", cfg.ShutdownTimeout}, {"--snapshot-every", cfg.SnapshotEvery}} {
		if d.v < 0 {
			return usageErrorf("%s %s: must not be negative", d.flag, d.v)
		}
	}
	for _, p := range cfg.Exclude {
		if err := mount.CheckExclude(p); err != nil {
			return usageErrorf("%v", err)
		}
	}
	switch {
	case cfg.KeepSnapshots < 0:
		return usageErrorf("--keep-snapshots %d: must not be negative", cfg.KeepSnapshots)
	case cfg.KeepSnapshots > 0 && cfg.SnapshotEvery == 0:
		return usageErrorf("--keep-snapshots needs --snapshot-every: it retires automatic snapshots only")
	case cfg.SnapshotEvery > 0 && cfg.ReadOnly:
		return usageErrorf("--snapshot-every needs a writable mount: a --read-only one takes no snapshots")
	}
	return nil
}

// runMount mounts and serves until a signal or an outside unmount.
func runMount(cmd *cobra.Command, cfg mount.Config) error {
	if cfg.ReadOnly {
		if err := checkStorePath(cfg.Store); err != nil {
			return err // a writable mount creates it
		}
	}
	ctx, giveUp, stop := shutdownSignals(cmd.Context())
	defer stop()
	cfg.GiveUp = giveUp
	cfg.Busy = func(b mount.BusyMount) { fmt.Fprintln(cmd.ErrOrStderr(), busyLine(b)) }
	cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	out := cmd.OutOrStdout()
	if path := os.Getenv(envCPUProfile); path != "" {
		stopProfile, err := startCPUProfile(path)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	if path := os.Getenv(envMemProfile); path != "" {
		defer writeAllocProfile(cmd.ErrOrStderr(), path)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(mountGCPercent)
	}
	if path := os.Getenv(envHeapProfile); path != "" {
		defer heapProfileOnSignal(cmd.ErrOrStderr(), path)()
	}
	cfg.Ready = func(m *mount.Mounted) {
		what := "store"
		if m.Created {
			what = "new store"
		}
		how := ""
		if cfg.ReadOnly {
			how = " read-only"
		}
		fmt.Fprintf(out, "deltafs: mounted %s %s%s on %s (pid %d); Ctrl-C or 'deltafs umount %s' to unmount\n",
			what, m.Store, how, m.MountPoint, os.Getpid(), m.MountPoint)
	}
	return mount.Run(ctx, cfg)
}

// shutdownSignals returns a context that the first SIGINT or SIGTERM
// cancels and a channel that the second one closes: the shutdown then
// stops waiting for a busy mount to be let go of. SIGHUP (the mount's
// terminal closed) cancels the context too, unless the mount was started
// with it ignored (nohup); a terminal's close may send it twice, so it
// never gives up the wait.
func shutdownSignals(parent context.Context) (ctx context.Context, giveUp <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs, hup := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	if !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(hup, syscall.SIGHUP)
	}
	second := make(chan struct{})
	done := make(chan struct{})
	go func() {
		for n := 0; n < 2; {
			select {
			case <-sigs:
				n++
			case <-hup:
			case <-done:
				return
			}
			cancel()
		}
		close(second)
	}()
	return ctx, second, func() { signal.Stop(sigs); signal.Stop(hup); close(done); cancel() }
}

// busyLine is the line the mount prints when its shutdown waits for a
// busy mount point to be let go of.
func busyLine(b mount.BusyMount) string {
	what := fmt.Sprintf("%s to be let go of", b.MountPoint)
	if n := b.OpenFiles(); n == 1 {
		what = fmt.Sprintf("1 open file in %s to be closed", b.MountPoint)
	} else if n > 1 {
		what = fmt.Sprintf("%d open files in %s to be closed", n, b.MountPoint)
	}
	if who := mount.DescribeHolders(b.Holders); who != "" {
		what += ", held by " + who
	}
	return fmt.Sprintf("deltafs: mount: waiting up to %s for %s; Ctrl-C again to stop waiting", b.Wait, what)
}

// mountGCPercent is the mount's GOGC (runtime/debug.SetGCPercent),
// unless the GOGC variable sets another. At the default, 100, the Go
// collector lets the heap grow to twice what is live before it collects:
// a busy mount holding ~110 MiB live (its text caches, badger's memtables
// and block cache, the small files read for recording) peaked at ~300 MB
// RSS (F1, bench/footprint.go). At 50 it collects at 1.5x: about twice as
// many collections, of a heap that is mostly byte slices (not scanned).
// A fixed memory limit (GOMEMLIMIT) bounded the peak better but made the
// collector run without pause while a big revision was held: reading a
// 256 MiB revision from .history took 1.4-1.6 s of mount CPU under a
// 192 MiB limit against 0.76-0.84 s without.
const mountGCPercent = 50

// envCPUProfile names a file to write a CPU profile of the whole mount
// (from start to unmount) or repack to: a debugging aid for performance
// work on a command run by a benchmark, deliberately not a flag.
const envCPUProfile = "DELTAFS_CPUPROFILE"

// envMemProfile names a file to write an allocation profile of the whole
// mount to at unmount: every allocation since the start, with the stacks
// that made it (sampled at runtime.MemProfileRate; GODEBUG=memprofilerate=1
// records each one). Like envCPUProfile, a debugging aid. pprof shows
// this profile's alloc_space (everything ever allocated) unless asked for
// -sample_index=inuse_space: what is held is envHeapProfile's business.
const envMemProfile = "DELTAFS_MEMPROFILE"

// writeAllocProfile writes the allocation profile to path, reporting a
// failure on errOut. The profile is as of the last collection, so it
// collects first: a mount that served a few listings may not have
// collected since its start.
func writeAllocProfile(errOut io.Writer, path string) {
	runtime.GC()
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		fmt.Fprintf(errOut, "deltafs: %s: %v\n", envMemProfile, err)
	}
}

// envHeapProfile names a file prefix: while the mount runs, SIGUSR1 makes
// it write a heap profile (live objects as of a fresh collection) to
// PREFIX.N and print the runtime's memory statistics on stderr. A
// debugging aid for the mount's footprint, like envMemProfile.
const envHeapProfile = "DELTAFS_HEAPPROFILE"

// heapProfileOnSignal writes a heap profile to prefix.N on each SIGUSR1
// until the returned stop is called.
func heapProfileOnSignal(errOut io.Writer, prefix string) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-sig:
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			path := fmt.Sprintf("%s.%d", prefix, n)
			f, err := os.Create(path)
			if err == nil {
				err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
			}
			if err != nil {
				fmt.Fprintf(errOut, "deltafs: %s: %v\n", envHeapProfile, err)
			}
			gogc := debug.SetGCPercent(-1)
			debug.SetGCPercent(gogc)
			fmt.Fprintf(errOut, "deltafs: %s: heap in use %d MiB, idle %d MiB, released %d MiB, stacks %d MiB, sys %d MiB, %d collections (%.2f%% of CPU), GOGC %d\n",
				path, ms.HeapInuse>>20, ms.HeapIdle>>20, ms.HeapReleased>>20, ms.StackInuse>>20, ms.Sys>>20, ms.NumGC, 100*ms.GCCPUFraction, gogc)
		}
	}()
	return func() { signal.Stop(sig); close(done) }
}

// startCPUProfile starts a CPU profile into path and returns its stop.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// mountErrorCode returns the exit code of a mount error, or 0 if it is
// none of the mount-specific ones.
func mountErrorCode(err error) int {
	switch {
	case errors.Is(err, mount.ErrNoFUSE): // also when /dev/fuse is not the user's to open
		return exitNoFUSE
	case errors.Is(err, os.ErrPermission), errors.Is(err, mount.ErrDenied): // a mount point or store the user may not reach, or a mount of another user
		return exitPermission
	case errors.Is(err, mount.ErrMountPoint), errors.Is(err, mount.ErrOverlap):
		return exitMountPoint
	case errors.Is(err, objstore.ErrLocked):
		return exitStoreLocked
	case errors.Is(err, objstore.ErrNotStore), errors.Is(err, objstore.ErrFormat), errors.Is(err, objstore.ErrNoIndex), errors.Is(err, mount.ErrNoStore), errors.Is(err, mount.ErrNoXattrs):
		return exitNotStore
	case errors.Is(err, mount.ErrBusy):
		return exitBusy
	}
	return 0
}
