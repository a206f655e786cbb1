package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/mount"
	"github.com/deltafs/deltafs/objstore"
	"github.com/spf13/cobra"
)

// newSnapshotCmd builds "deltafs snapshot" and its subcommands.
func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Create, list, delete, rename and prune snapshots of a store",
		Long: `Snapshots are read-only copies of the whole tree, shown under
MOUNTPOINT/.snapshots/NAME. Each command takes the store directory, or any
path inside a deltafs mount; a mounted store is reached through its
running mount (which answers only the user who mounted it, and root), an
unmounted one is opened directly.`,
		Args: noSubcommand,
		RunE: showHelp,
	}
	cmd.AddCommand(newSnapCreateCmd(), newSnapListCmd(), newSnapDeleteCmd(), newSnapRenameCmd(), newSnapPruneCmd())
	return cmd
}

// withController runs fn with the Controller of the store at target.
func withController(cmd *cobra.Command, target string, readOnly bool, fn func(mount.Controller) error) error {
	log := offlineLogger(cmd)
	c, closeFn, err := mount.Connect(cmd.Context(), target, readOnly, log)
	if err != nil {
		return err
	}
	return errors.Join(snapUsage(fn(c)), closeFn())
}

// snapUsage makes an invalid snapshot name a usage error.
func snapUsage(err error) error {
	if errors.Is(err, index.ErrBadName) {
		return &usageError{err: err}
	}
	return err
}

// snapNameRules is what "snapshot create" and "rename" refuse in a new
// name (mount.CheckSnapshotName); their usage errors point at this help.
const snapNameRules = `A new name is one file name: not empty, "." or "..", no "/", at most
255 bytes, and no control character (a newline or tab would break
"snapshot list"'s lines). Names auto-YYYY-MM-DDTHH:MM:SSZ are reserved
for the automatic snapshots of "deltafs mount --snapshot-every", so a
snapshot you name is never retired.`

func newSnapCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create STORE|PATH NAME",
		Short: "Take a snapshot of the whole tree called NAME",
		Long: `Take a read-only snapshot of the whole tree, shown under
MOUNTPOINT/.snapshots/NAME (also "mkdir MOUNTPOINT/.snapshots/NAME").

` + snapNameRules,
		Example: "  deltafs snapshot create ~/work before-refactor",
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mount.CheckSnapshotName(args[1]); err != nil {
				return &usageError{err: err}
			}
			return withController(cmd, args[0], false, func(c mount.Controller) error {
				s, err := c.CreateSnapshot(cmd.Context(), args[1])
				if err == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s taken at %s\n", s.Name, snapTime(s))
				}
				return err
			})
		},
	}
}

func newSnapListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list STORE|PATH",
		Short: "List snapshots, oldest first: name, UTC time and the bytes only it holds",
		Long: `List snapshots, oldest first: name, UTC time, and the bytes only that
snapshot holds: the stored size of the revisions no other snapshot
references and that are not a live file's newest revision. That is what
deleting it lets 'deltafs gc --prune-unsnapshotted' free; the default gc
keeps live files' history, so it frees only the part of deleted files.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withController(cmd, args[0], true, func(c mount.Controller) error {
				list, err := c.ListSnapshots(cmd.Context())
				if err != nil {
					return err
				}
				usage, err := c.SnapshotUsages(cmd.Context())
				if err != nil {
					return err
				}
				return printSnapshots(cmd.OutOrStdout(), list, usage, asJSON, forPeople(cmd))
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {id, name, time, exclusive_bytes, exclusive_revisions}")
	return cmd
}

// snapshotRow is one snapshot as "snapshot list --json" prints it.
type snapshotRow struct {
	mount.SnapshotInfo
	ExclusiveBytes     uint64 `json:"exclusive_bytes"`
	ExclusiveRevisions int64  `json:"exclusive_revisions"`
}

// printSnapshots prints one line per snapshot: name, UTC time and the
// bytes only it holds (what deleting it would free); as log does, aligned
// with a header and human sizes for people, tab-separated with exact
// byte counts for scripts.
func printSnapshots(w io.Writer, list []index.Snapshot, usage []objstore.SnapshotUsage, asJSON, people bool) error {
	byID := make(map[index.SnapshotID]objstore.SnapshotUsage, len(usage))
	for _, u := range usage {
		byID[u.ID] = u
	}
	if asJSON {
		out := make([]snapshotRow, len(list))
		for i, s := range list {
			u := byID[s.ID]
			out[i] = snapshotRow{SnapshotInfo: mount.SnapshotInfo{ID: uint64(s.ID), Name: mount.ByteString(s.Name), Time: time.Unix(0, s.Time).UTC()},
				ExclusiveBytes: u.ExclusiveBytes, ExclusiveRevisions: u.ExclusiveRevs}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	t := newTable(w, people, "NAME\tTIME\tEXCLUSIVE")
	for _, s := range list {
		t.row("%s\t%s\t%s\n", listName(s.Name), snapTime(s), t.size(byID[s.ID].ExclusiveBytes))
	}
	return t.flush()
}

// listName is a snapshot's name as a listing's column shows it: quoted
// with Go's escapes when it holds a control character (a tab or newline
// would break the columns), as only an older build let a name do.
func listName(name string) string {
	if strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return strconv.Quote(name)
	}
	return name
}

func snapTime(s index.Snapshot) string {
	return time.Unix(0, s.Time).UTC().Format(time.RFC3339)
}

func newSnapDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete STORE|PATH NAME",
		Short: "Delete the snapshot NAME",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withController(cmd, args[0], false, func(c mount.Controller) error {
				return noSnapshot(c.DeleteSnapshot(cmd.Context(), args[1]), args[1])
			})
		},
	}
}

// noSnapshot turns err, if it says that the snapshot name does not exist,
// into that one plain sentence (still matching index.ErrNotFound).
func noSnapshot(err error, name string) error {
	if errors.Is(err, index.ErrNotFound) {
		return &notFoundError{msg: fmt.Sprintf("no snapshot named %q", name)}
	}
	return err
}

// notFoundError is a message of its own for something that does not
// exist; it matches index.ErrNotFound (exit code exitNotFound).
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == index.ErrNotFound }

func newSnapRenameCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rename STORE|PATH OLD NEW",
		Short: "Rename the snapshot OLD to NEW",
		Long: `Rename the snapshot OLD to NEW (also "mv" in MOUNTPOINT/.snapshots/).
Rename an automatic snapshot to keep it: --keep-snapshots retires only
names of its own.

` + snapNameRules,
		Args: exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mount.CheckSnapshotName(args[2]); err != nil {
				return &usageError{err: err}
			}
			return withController(cmd, args[0], false, func(c mount.Controller) error {
				return noSnapshot(c.RenameSnapshot(cmd.Context(), args[1], args[2]), args[1])
			})
		},
	}
}

// pruneFlags are the options of "deltafs snapshot prune".
type pruneFlags struct {
	r      mount.Retention
	dryRun bool
	json   bool
}

func newSnapPruneCmd() *cobra.Command {
	var fl pruneFlags
	cmd := &cobra.Command{
		Use:   "prune STORE|PATH --keep-last N --keep-daily N --keep-weekly N",
		Short: "Delete the snapshots no retention rule keeps",
		Long: `Delete the snapshots that no rule keeps, as restic and borg do; walking
the snapshots newest first:
  --keep-last N    keeps the N newest snapshots;
  --keep-daily N   keeps the newest snapshot of each of the N most recent
                   days that have snapshots (UTC days);
  --keep-weekly N  the same for ISO weeks (UTC, from Monday).
A snapshot any rule keeps stays. At least one rule is required. Each
snapshot is printed with what happens to it and why; --dry-run changes
nothing. Deleting snapshots frees no space by itself: 'deltafs gc'
removes what only they held (see 'deltafs snapshot list' for how much).`,
		Example: `  deltafs snapshot prune ~/work --keep-last 5 --keep-daily 7 --keep-weekly 4
  deltafs snapshot prune ~/work.dfs --keep-daily 30 --dry-run`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fl.r.Last < 0 || fl.r.Daily < 0 || fl.r.Weekly < 0 {
				return usageErrorf("--keep-last, --keep-daily and --keep-weekly must not be negative")
			}
			if fl.r.IsZero() {
				return usageErrorf("no retention rule: give --keep-last, --keep-daily or --keep-weekly (prune never deletes every snapshot)")
			}
			return withController(cmd, args[0], fl.dryRun, func(c mount.Controller) error {
				return runPrune(cmd, c, fl)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&fl.r.Last, "keep-last", 0, "keep the `N` newest snapshots")
	f.IntVar(&fl.r.Daily, "keep-daily", 0, "keep the newest snapshot of each of the last `N` days with snapshots")
	f.IntVar(&fl.r.Weekly, "keep-weekly", 0, "keep the newest snapshot of each of the last `N` weeks with snapshots")
	f.BoolVar(&fl.dryRun, "dry-run", false, "say what would be deleted; delete nothing")
	f.BoolVar(&fl.json, "json", false, "print a JSON array of {id, name, time, keep, reasons}")
	return cmd
}

// pruneRow is one snapshot as "snapshot prune --json" prints it.
type pruneRow struct {
	mount.SnapshotInfo
	Keep    bool     `json:"keep"`
	Reasons []string `json:"reasons"`
}

// runPrune plans, prints each decision and deletes (unless a dry run).
// A decision is a line of tab-separated columns, the action first (keep,
// remove, would remove), then the snapshot's name, time and, if kept,
// the rules that keep it; on a terminal the columns are aligned.
func runPrune(cmd *cobra.Command, c mount.Controller, fl pruneFlags) error {
	list, err := c.ListSnapshots(cmd.Context())
	if err != nil {
		return err
	}
	plan := mount.PlanPrune(list, fl.r)
	w := cmd.OutOrStdout()
	out := w
	var tw *tabwriter.Writer
	if forPeople(cmd) && !fl.json {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		out = tw
	}
	rows := make([]pruneRow, 0, len(plan))
	removed := 0
	for _, d := range plan {
		s := d.Snapshot
		rows = append(rows, pruneRow{SnapshotInfo: mount.SnapshotInfo{ID: uint64(s.ID), Name: mount.ByteString(s.Name), Time: time.Unix(0, s.Time).UTC()},
			Keep: d.Keep, Reasons: append([]string{}, d.Reasons...)})
		if d.Keep {
			if !fl.json {
				fmt.Fprintf(out, "keep\t%s\t%s\t(%s)\n", listName(s.Name), snapTime(s), strings.Join(d.Reasons, ", "))
			}
			continue
		}
		removed++
		if !fl.dryRun {
			if err := c.DeleteSnapshot(cmd.Context(), s.Name); err != nil {
				if tw != nil {
					tw.Flush() // what was done so far
				}
				return err
			}
		}
		if !fl.json {
			verb := "remove"
			if fl.dryRun {
				verb = "would remove"
			}
			fmt.Fprintf(out, "%s\t%s\t%s\n", verb, listName(s.Name), snapTime(s))
		}
	}
	if fl.json {
		return writeJSON(w, rows)
	}
	if tw != nil {
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	verb := "removed"
	if fl.dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "%s: kept %d, %s %d\n", count(len(plan), "snapshot"), len(plan)-removed, verb, removed)
	return nil
}
