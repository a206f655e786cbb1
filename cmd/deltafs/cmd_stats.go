package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// newStatsCmd builds "deltafs stats".
func newStatsCmd() *cobra.Command {
	var asJSON bool
	var storeOf func(args []string) string
	cmd := &cobra.Command{
		Use:   "stats STORE|PATH",
		Short: "Show a store's files, revisions, snapshots, sizes and delta chains",
		Long: `Show what a store holds: files, revisions and snapshots; the logical
bytes (all revisions' sizes) against the bytes stored; delta chain
lengths. A mounted store answers through its mount. With --json, scripts
read at least files, revisions, snapshots, logical_bytes, stored_bytes
and max_chain.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withController(cmd, storeOf(args), true, func(c mount.Controller) error {
				st, err := c.Stats(cmd.Context())
				if err != nil {
					return err
				}
				return printStats(cmd.OutOrStdout(), st, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	storeOf = storeFlag(cmd)
	return cmd
}

func printStats(w io.Writer, st mount.Stats, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	ratio := "nothing stored"
	switch {
	case st.StoredBytes > 0 && st.LogicalBytes >= st.StoredBytes:
		ratio = fmt.Sprintf("%.1fx smaller than the logical bytes", float64(st.LogicalBytes)/float64(st.StoredBytes))
	case st.StoredBytes > 0:
		// Tiny files cost more in record headers than they hold.
		ratio = fmt.Sprintf("%.1fx larger than the logical bytes", float64(st.StoredBytes)/float64(max(st.LogicalBytes, 1)))
	}
	_, err := fmt.Fprintf(w, `files         %d
revisions     %d
snapshots     %d
logical bytes %d
stored bytes  %d (%s)
segment bytes %d
delta chains  max %d, mean %.1f
`, st.Files, st.Revisions, st.Snapshots, st.LogicalBytes, st.StoredBytes, ratio, st.SegmentBytes, st.MaxChain, st.MeanChain)
	if err == nil && st.InterruptedRepack > 0 {
		_, err = fmt.Fprintf(w, "interrupted repack %d bytes in the store's repack/ (the next repack with the same options resumes it; any other discards it)\n", st.InterruptedRepack)
	}
	if err == nil && st.Damage != "" {
		_, err = fmt.Fprintf(w, "damaged       %s (deltafs verify lists the revisions lost; gc and repack refuse)\n", st.Damage)
	}
	return err
}
