package main

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// newLogCmd builds "deltafs log".
func newLogCmd() *cobra.Command {
	var t historyTarget
	var deleted bool
	cmd := &cobra.Command{
		Use:   "log PATH | --deleted [DIR]",
		Short: "List every revision of a file: time, size, delta base, chain, snapshots",
		Long: `List every revision of the file at PATH, oldest first: its number, when
it was recorded (UTC), its size, how it is stored (full, or a delta
against p1, p2, p1+p2 (both parents at once), snapshot, hint,
intermediate; dedup: another revision holds the same bytes; reused), the
length of the delta chain that rebuilds it and the snapshots holding it.
On a terminal the columns are aligned under a header, sizes human;
piped, they are tab-separated with exact byte counts. History follows
renames and atomic saves as the mount recorded them. PATH is a file
inside a deltafs mount (the mount first records every change closed
before the call) or inside an unmounted store's live directory; or give
--store STORE and PATH relative to the tree root. It costs only this
file's revisions, plus its own rows of the snapshots holding them (a
store whose snapshots an older deltafs took: one look at each
snapshot's reference set).

A PATH where no file lives now names the newest deleted file whose last
path it is (where it was removed from, or its last revision recorded),
if its history is still in the store (gc
removes a deleted file's revisions that no snapshot holds). --deleted
lists those files, newest first: the time and size of the last
revision, the file's id (for --id), its revisions left, its last path;
under DIR only, if given (a directory of a mount, or --store STORE and
DIR relative to the tree root).`,
		Example: "  deltafs log ~/work/notes.txt\n  deltafs log --store ~/work.dfs notes.txt --json\n  deltafs log --deleted ~/work/docs\n  deltafs log --id 12 ~/work",
		Args: func(cmd *cobra.Command, args []string) error {
			return t.args(deleted)(cmd, args) // log --deleted: DIR is optional
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if deleted {
				return logDeleted(cmd, &t, args)
			}
			return t.run(cmd, args, true, func(c mount.Controller, target mount.Target) error {
				l, err := c.Log(cmd.Context(), target)
				if err != nil {
					return err
				}
				t.noteDeleted(cmd, l.FileInfo)
				if t.asJSON {
					return printJSON(cmd.OutOrStdout(), l)
				}
				return printLog(cmd.OutOrStdout(), l, forPeople(cmd))
			})
		},
	}
	t.flags(cmd, "print one JSON object: path, file, deleted, revisions [{rev, time, size, base, chain, snapshots, ...}]; with --deleted, an array of {path, file, deleted, revisions (how many), time, size}")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "list the deleted files whose history is still in the store")
	return cmd
}

// logDeleted runs "deltafs log --deleted [DIR]".
func logDeleted(cmd *cobra.Command, t *historyTarget, args []string) error {
	if len(args) > 1 {
		return usageErrorf("expects at most 1 argument, got %d", len(args))
	}
	if t.id != 0 {
		return usageErrorf("give --deleted or --id, not both")
	}
	return t.run(cmd, args, true, func(c mount.Controller, target mount.Target) error {
		list, err := c.Deleted(cmd.Context(), target.Path)
		if err != nil {
			return err
		}
		if t.asJSON {
			if list == nil {
				list = []mount.DeletedFile{} // [], not null
			}
			return printJSON(cmd.OutOrStdout(), list)
		}
		return printDeleted(cmd.OutOrStdout(), list, forPeople(cmd))
	})
}

// printDeleted prints one line per deleted file, as printLog does.
func printDeleted(w io.Writer, list []mount.DeletedFile, people bool) error {
	t := newTable(w, people, "TIME\tSIZE\tFILE\tREVS\tPATH")
	for _, d := range list {
		t.row("%s\t%s\t%d\t%d\t%s\n", d.Time.UTC().Format(time.RFC3339), t.size(d.Size), d.File, d.Revisions, listName(string(d.Path)))
	}
	return t.flush()
}

// printLog prints one line per revision (see table).
func printLog(w io.Writer, l mount.FileLog, people bool) error {
	t := newTable(w, people, "REV\tTIME\tSIZE\tBASE\tCHAIN\tSNAPSHOTS")
	for _, r := range l.Revisions {
		names := make([]string, len(r.Snapshots))
		for i, n := range r.Snapshots {
			// quoted when it holds the column's separator, or breaks lines
			if names[i] = listName(n); names[i] == n && strings.Contains(n, ",") {
				names[i] = strconv.Quote(n)
			}
		}
		snaps := strings.Join(names, ",")
		if snaps == "" && people {
			snaps = "-"
		}
		t.row("%d\t%s\t%s\t%s\t%d\t%s\n", r.Rev, r.Time.UTC().Format(time.RFC3339), t.size(r.Size), r.Base, r.Chain, snaps)
	}
	return t.flush()
}
