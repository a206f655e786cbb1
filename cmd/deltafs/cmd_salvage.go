package main

import (
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/mount"
	"github.com/deltafs/deltafs/objstore"
	"github.com/spf13/cobra"
)

// salvageFlags are the command-line options of "deltafs salvage".
type salvageFlags struct {
	dryRun bool
	json   bool
}

// newSalvageCmd builds "deltafs salvage".
func newSalvageCmd() *cobra.Command {
	var fl salvageFlags
	var storeOf func(args []string) string
	cmd := &cobra.Command{
		Use:   "salvage [flags] STORE",
		Short: "Rewrite a damaged, unmounted store: keep what still reads, bring back what the live tree holds, mark the rest lost",
		Long: `Rewrite a store whose segments lost revisions (a segment cut short
behind the store's back, a bad record: what verify lists) so that it can
go on: gc and repack refuse a damaged store, and verify fails on it.

Every revision that still reads is stored as repack would. A revision
that does not is brought back when its content is still somewhere,
found by its content hash and size: in its file's live file (after a
segment's tail was cut, the newest revisions are the lost ones, and the
live tree still holds them), or in another revision. Revisions built on
one brought back read again too. What is left is kept as lost: its
place in its file's history, its parents, size, hash and time stay, and
log, snapshots and verify name it, but a read of it is an I/O error.
A live file whose newest revision is lost is recorded again, as a new
revision after it.

Put the segment back from a backup instead if you have one: that loses
nothing. --dry-run says what a salvage would bring back and lose,
writing nothing. The store must not be mounted.`,
		Example: `  deltafs verify ~/work.dfs          # lists what does not read
  deltafs salvage --dry-run ~/work.dfs
  deltafs salvage ~/work.dfs`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSalvage(cmd, storeOf(args), fl)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fl.dryRun, "dry-run", false, "say what would be brought back and lost; write nothing")
	f.BoolVar(&fl.json, "json", false, "print the report as JSON")
	storeOf = storeFlag(cmd)
	return cmd
}

// runSalvage salvages the store and prints the report.
func runSalvage(cmd *cobra.Command, store string, fl salvageFlags) error {
	if err := checkStorePath(store); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opt := objstore.SalvageOptions{DryRun: fl.dryRun}
	opt.Repack.Logger = offlineLogger(cmd)
	opt.LiveFiles = func() (map[index.FileID]string, error) { return mount.LivePaths(store) }
	rep, err := objstore.Salvage(ctx, store, opt)
	if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
		return fmt.Errorf("interrupted; run it again to resume: %w", err)
	}
	if err != nil {
		return err
	}
	if fl.json {
		return writeJSON(cmd.OutOrStdout(), struct {
			Store string `json:"store"`
			objstore.SalvageReport
		}{store, rep})
	}
	printSalvageReport(cmd.OutOrStdout(), store, rep)
	return nil
}

// printSalvageReport writes the human report.
func printSalvageReport(w io.Writer, store string, r objstore.SalvageReport) {
	switch {
	case r.Damaged == 0:
		fmt.Fprintf(w, "%s: every revision reads; nothing to salvage\n", store)
		return
	case r.DryRun:
		fmt.Fprintf(w, "%s: %s do not read: a salvage would bring back %d (%d from live files, %d from other revisions) and keep %d as lost\n",
			store, count(r.Damaged, "revision"), r.Recovered, r.FromLive, r.FromOther, r.Lost)
	default:
		fmt.Fprintf(w, "salvaged %s in %s: of %s that did not read, %d brought back (%d from live files, %d from other revisions), %d kept as lost\n",
			store, r.Duration.Round(time.Millisecond), count(r.Damaged, "revision"), r.Recovered, r.FromLive, r.FromOther, r.Lost)
		if r.Rerecorded > 0 {
			fmt.Fprintf(w, "  %s whose newest revision was lost recorded again from the live tree\n", count(r.Rerecorded, "live file"))
		}
	}
	for _, id := range r.LostRevisions {
		fmt.Fprintf(w, "  lost: file %d revision %d\n", id.File, id.Rev)
	}
}
