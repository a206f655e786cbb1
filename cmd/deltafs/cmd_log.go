package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// newLogCmd builds "deltafs log".
func newLogCmd() *cobra.Command {
	var t historyTarget
	cmd := &cobra.Command{
		Use:   "log PATH",
		Short: "List every revision of a file: time, size, delta base, chain, snapshots",
		Long: `List every revision of the file at PATH, oldest first: its number, when
it was recorded (UTC), its size, how it is stored (full, or a delta
against p1, p2, snapshot, hint, intermediate, dedup, reused), the length
of the delta chain that rebuilds it and the snapshots holding it. History
follows renames and atomic saves as the mount recorded them. PATH is a
file inside a deltafs mount (the mount first records every change closed
before the call) or inside an unmounted store's live directory; or give
--store STORE and PATH relative to the tree root. It costs only this
file's revisions, plus one look at each snapshot's reference set.`,
		Example: "  deltafs log ~/work/notes.txt\n  deltafs log --store ~/work.dfs notes.txt --json",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return t.run(cmd, args[0], true, func(c mount.Controller, rel string) error {
				l, err := c.Log(cmd.Context(), rel)
				if err != nil {
					return err
				}
				if t.asJSON {
					return printJSON(cmd.OutOrStdout(), l)
				}
				return printLog(cmd.OutOrStdout(), l, forPeople(cmd))
			})
		},
	}
	t.flags(cmd, "print one JSON object: path, file, revisions [{rev, time, size, base, chain, snapshots, ...}]")
	return cmd
}

// printLog prints one line per revision: aligned with human sizes for
// people, tab-separated with exact sizes for scripts. Output is buffered:
// a history of 10,000 revisions is one write, not 10,000.
func printLog(w io.Writer, l mount.FileLog, people bool) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	out := io.Writer(bw)
	var tw *tabwriter.Writer
	if people {
		tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		out = tw
		fmt.Fprintln(out, "REV\tTIME\tSIZE\tBASE\tCHAIN\tSNAPSHOTS")
	}
	for _, r := range l.Revisions {
		size := strconv.FormatUint(r.Size, 10)
		if people {
			size = humanSize(r.Size)
		}
		snaps := strings.Join(r.Snapshots, ",")
		if snaps == "" && people {
			snaps = "-"
		}
		fmt.Fprintf(out, "%d\t%s\t%s\t%s\t%d\t%s\n", r.Rev, r.Time.UTC().Format(time.RFC3339), size, r.Base, r.Chain, snaps)
	}
	if tw != nil {
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return bw.Flush() // the first write error, if any
}
