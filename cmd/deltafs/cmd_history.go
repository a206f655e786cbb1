package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// The history commands (log, cat, restore) name a file in one of two
// ways, both working on a mounted store (through its running mount) and
// an unmounted one (opened directly):
//
//	deltafs log ~/work/notes.txt                  a path inside a mount, or inside STORE/live
//	deltafs log --store ~/work.dfs notes.txt      a store (or any path in its mount) and the
//	                                              file's path relative to the tree root
//
// The second form is the offline one: an unmounted store's files live in
// STORE/live, and --store spares the user from knowing that.

// historyTarget holds the flags every history command shares.
type historyTarget struct {
	store  string
	asJSON bool
}

func (h *historyTarget) flags(cmd *cobra.Command, jsonHelp string) {
	cmd.Flags().StringVar(&h.store, "store", "", "the store (or a path in its mount); PATH is then relative to the tree root")
	cmd.Flags().BoolVar(&h.asJSON, "json", false, jsonHelp)
}

// run resolves path and runs fn with the store's Controller and the
// file's path relative to the tree root.
func (h *historyTarget) run(cmd *cobra.Command, path string, readOnly bool, fn func(c mount.Controller, rel string) error) error {
	store, rel := h.store, path
	if store == "" {
		var err error
		if store, rel, err = mount.Locate(path); err != nil {
			return err
		}
	}
	return withController(cmd, store, readOnly, func(c mount.Controller) error { return fn(c, rel) })
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// forPeople reports whether stdout is a terminal: aligned columns and
// human sizes there, tab-separated exact figures for scripts otherwise.
func forPeople(cmd *cobra.Command) bool {
	f, ok := cmd.OutOrStdout().(*os.File)
	return ok && isTerminal(f)
}

// humanSize formats n bytes in binary units: 512 B, 1.5 KiB, 8.0 MiB.
func humanSize(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}
