package main

import (
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/mount"
	"github.com/deltafs/deltafs/objstore"
	"github.com/spf13/cobra"
)

// gcFlags are the command-line options of "deltafs gc".
type gcFlags struct {
	opt        objstore.GCOptions
	keepWithin durationFlag
	memory     sizeFlag
	json       bool
}

// newGCCmd builds "deltafs gc".
func newGCCmd() *cobra.Command {
	var fl gcFlags
	var storeOf func(args []string) string
	cmd := &cobra.Command{
		Use:   "gc [flags] STORE",
		Short: "Remove revisions that no snapshot and no live file needs, and their data",
		Long: `Remove from an unmounted STORE the revisions nothing needs any more, and
reclaim their space.

What gc keeps:
  - every revision a snapshot holds, and the newest revision of every
    live file (a file in the live tree);
  - by default, every other revision of a live file too: its history;
  - with --prune-unsnapshotted, not that history: only the newest
    revision and what snapshots hold;
  - with --keep-within DURATION, the revisions recorded within DURATION
    before now as well (of any file), the older history going.
What gc removes: the revisions of deleted files that no snapshot holds,
and the history the flags above let go. Delete snapshots first
('deltafs snapshot delete', 'deltafs snapshot prune') to let gc free
what only they held.

The kept revisions are rewritten into new segments the way repack does
(a kept revision stored as a delta against a removed one is stored again
against a kept one), then switched to atomically: a crash or kill at any
moment leaves a store that reads every kept revision, and an interrupted
gc continues where it stopped when run again. Only then are the removed
revisions' entries deleted. Nothing to remove, nothing is rewritten.

The store must not be mounted. A progress bar is shown when stderr is a
terminal.`,
		Example: `  deltafs gc ~/work.dfs
  deltafs gc --dry-run ~/work.dfs
  deltafs gc --keep-within 30d --json ~/work.dfs`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGC(cmd, storeOf(args), fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.opt.Policy.PruneUnsnapshotted, "prune-unsnapshotted", false, "also remove live files' revisions that no snapshot holds, except the newest")
	f.Var(&fl.keepWithin, "keep-within", "prune history as --prune-unsnapshotted, but keep revisions recorded within `DURATION` (e.g. 36h, 30d, 2w)")
	f.BoolVar(&fl.opt.DryRun, "dry-run", false, "say what would be removed; change nothing")
	f.IntVar(&fl.opt.Repack.Jobs, "jobs", 0, "rewrite `N` files at once (default: the number of CPUs)")
	f.Var(&fl.memory, "memory-limit", "bound the texts held in memory to `SIZE` (e.g. 512MiB); default: half the RAM")
	f.BoolVar(&fl.json, "json", false, "print the report as JSON")
	storeOf = storeFlag(cmd)
	return cmd
}

// runGC collects the store and prints the report.
func runGC(cmd *cobra.Command, store string, fl gcFlags) error {
	if fl.opt.Repack.Jobs < 0 {
		return usageErrorf("--jobs must not be negative")
	}
	if err := checkStorePath(store); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fl.opt.Policy.KeepWithin = time.Duration(fl.keepWithin)
	fl.opt.Repack.MemoryLimit = int64(fl.memory)
	fl.opt.Repack.Logger = offlineLogger(cmd)
	fl.opt.Live = func() (map[index.FileID]bool, error) { return mount.LiveFiles(store) }
	bar := newProgressBar(cmd.ErrOrStderr(), "gc")
	if bar != nil {
		fl.opt.Repack.Progress = func(p objstore.RepackProgress) {
			bar.update(p.Done, p.Revisions, p.Bytes, p.TotalBytes)
		}
	}
	rep, err := objstore.GC(ctx, store, fl.opt)
	bar.finish()
	if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
		return fmt.Errorf("interrupted; run it again to resume: %w", err)
	}
	if err != nil {
		return err
	}
	if fl.json {
		return writeJSON(cmd.OutOrStdout(), struct {
			Store string `json:"store"`
			objstore.GCReport
		}{store, rep})
	}
	printGCReport(cmd.OutOrStdout(), store, rep)
	return nil
}

// printGCReport writes the human report.
func printGCReport(w io.Writer, store string, r objstore.GCReport) {
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "gc %s: %s %d of %s (%s entirely), %s of records; kept %d\n",
		store, verb, r.Removed, count(r.Revisions, "revision"), count(r.RemovedFiles, "file"), humanSize(r.RemovedStored), r.Kept)
	fmt.Fprintf(w, "  from      %s, %s\n", count(r.Snapshots, "snapshot"), count(r.LiveFiles, "live file"))
	if r.Repack != nil {
		fmt.Fprintf(w, "  size      %s -> %s, %s reclaimed\n", humanSize(r.SizeBefore), humanSize(r.SizeAfter), humanSize(r.Reclaimed))
		fmt.Fprintf(w, "  rewrite   %d re-deltaed, %d reused verbatim, %d unchanged\n", r.Repack.Redeltaed, r.Repack.Reused, r.Repack.Unchanged)
	}
	fmt.Fprintf(w, "  time      %s, peak memory %s\n", r.Duration.Round(time.Millisecond), humanSize(uint64(r.PeakRSS)))
}

// durationFlag is a duration: Go's syntax (90m, 36h) plus days and weeks
// (30d, 2w).
type durationFlag time.Duration

// String is empty for zero, which is "not given" (Set refuses it), so that
// the help shows no "(default 0s)" for a value the flag would not take.
func (f *durationFlag) String() string {
	if *f == 0 {
		return ""
	}
	return time.Duration(*f).String()
}
func (f *durationFlag) Type() string { return "duration" }
func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f = durationFlag(d)
	return nil
}

// parseDuration parses "36h", "90m", "30d", "2w"; it must be positive.
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	unit := time.Duration(0)
	switch {
	case strings.HasSuffix(t, "d"):
		unit = 24 * time.Hour
	case strings.HasSuffix(t, "w"):
		unit = 7 * 24 * time.Hour
	}
	var d time.Duration
	var err error
	if unit != 0 {
		var n float64
		n, err = strconv.ParseFloat(t[:len(t)-1], 64)
		d = time.Duration(n * float64(unit))
	} else {
		d, err = time.ParseDuration(t)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("bad duration %q: want e.g. 36h, 30d or 2w", s)
	}
	return d, nil
}
