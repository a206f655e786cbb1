package main

import (
	"errors"
	"fmt"

	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// restoreJSON is what "deltafs restore --json" prints.
type restoreJSON struct {
	mount.FileRev        // path, file, deleted; revision: the new revision
	From          uint32 `json:"from"` // the revision brought back
}

// newRestoreCmd builds "deltafs restore".
func newRestoreCmd() *cobra.Command {
	var t historyTarget
	var rev int64
	cmd := &cobra.Command{
		Use:   "restore PATH --rev N",
		Short: "Bring an old revision of a file back, as a new revision",
		Long: `Write revision N of the file at PATH back into the file, recorded as a new
revision whose second parent is N: nothing of the history is lost, and
"deltafs log" shows the restore. On a mounted store the running mount
writes it, like any writer; PATH is as for "deltafs log".

A PATH where no file lives now names the newest deleted file whose last
path it is: restore makes it again at PATH (mode 0600: the store
keeps no mode), from revision N or, without --rev, its newest, and its
history goes on. --id N names a deleted file by its id ('deltafs log
--deleted'), made again at PATH, or at its last path when PATH is left
out (with --store).`,
		Example: "  deltafs restore ~/work/notes.txt --rev 3\n  deltafs restore ~/work/deleted-by-mistake.txt\n  deltafs restore --id 12 ~/work/notes.old",
		Args:    t.args(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			var at *uint32
			if cmd.Flags().Changed("rev") {
				spec, err := revSpec(cmd, rev, "")
				if err != nil {
					return err
				}
				at = spec.Rev
			}
			return t.run(cmd, args, false, func(c mount.Controller, target mount.Target) error {
				r, err := c.Restore(cmd.Context(), target, at)
				if errors.Is(err, mount.ErrNeedRev) {
					return usageErrorf("--rev N is required: %s is not a deleted file", target.Path)
				}
				if err != nil {
					return err
				}
				from := uint32(0)
				if r.Revision.P2 != nil {
					from = r.Revision.P2.Rev
				}
				if t.asJSON {
					return printJSON(cmd.OutOrStdout(), restoreJSON{FileRev: r, From: from})
				}
				if r.Deleted {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: deleted file %d made again from its revision %d, as revision %d\n", r.Path, r.File, from, r.Revision.Rev)
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: revision %d restored as revision %d\n", r.Path, from, r.Revision.Rev)
				return err
			})
		},
	}
	t.flags(cmd, "print one JSON object: path, file, deleted, from, revision {rev, time, size, ...}")
	// The zero default is never used (RunE asks whether --rev was given)
	// and not shown: the help says what leaving it out means.
	cmd.Flags().Int64Var(&rev, "rev", 0, "the revision `N` to bring back; required but for a deleted file (default: its newest)")
	return cmd
}
