package main

import (
	"fmt"

	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// restoreJSON is what "deltafs restore --json" prints.
type restoreJSON struct {
	Path     mount.ByteString `json:"path"`
	From     uint32           `json:"from"`     // the revision brought back
	Revision mount.RevInfo    `json:"revision"` // the new revision
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
writes it, like any writer; PATH is as for "deltafs log".`,
		Example: "  deltafs restore ~/work/notes.txt --rev 3",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("rev") {
				return usageErrorf("--rev N is required")
			}
			spec, err := revSpec(cmd, rev, "")
			if err != nil {
				return err
			}
			return t.run(cmd, args[0], false, func(c mount.Controller, rel string) error {
				r, err := c.Restore(cmd.Context(), rel, *spec.Rev)
				if err != nil {
					return err
				}
				if t.asJSON {
					return printJSON(cmd.OutOrStdout(), restoreJSON{Path: mount.ByteString(rel), From: *spec.Rev, Revision: r})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: revision %d restored as revision %d\n", rel, *spec.Rev, r.Rev)
				return err
			})
		},
	}
	t.flags(cmd, "print one JSON object: path, from, revision {rev, time, size, ...}")
	cmd.Flags().Int64Var(&rev, "rev", -1, "the revision to bring back")
	return cmd
}
