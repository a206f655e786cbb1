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
//
// A PATH with no live file names the newest deleted file last recorded
// there (the command says so on stderr); --id N names store file N,
// live or deleted (PATH then only finds the store, and is where restore
// makes a deleted file again; with --store it may be left out).

// historyTarget holds the flags every history command shares.
type historyTarget struct {
	store  string
	asJSON bool
	id     uint64
}

func (h *historyTarget) flags(cmd *cobra.Command, jsonHelp string) {
	cmd.Flags().StringVar(&h.store, "store", "", "the store `STORE` (or a path in its mount); PATH is then relative to the tree root")
	cmd.Flags().BoolVar(&h.asJSON, "json", false, jsonHelp)
	cmd.Flags().Uint64Var(&h.id, "id", 0, "the file with id `N` (see 'deltafs log --deleted'), live or deleted")
}

// args checks the arguments: PATH, which --store and --id (or
// optional, true: log --deleted) make optional.
func (h *historyTarget) args(optional bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 && (optional || h.store != "" && h.id != 0) {
			return nil
		}
		return exactArgs(1)(cmd, args)
	}
}

// run resolves path and runs fn with the store's Controller and the
// file it names.
func (h *historyTarget) run(cmd *cobra.Command, args []string, readOnly bool, fn func(c mount.Controller, t mount.Target) error) error {
	path := "."
	if len(args) > 0 {
		path = args[0]
	}
	store, rel := h.store, path
	if store == "" {
		var err error
		if store, rel, err = mount.Locate(path); err != nil {
			if s, serr := mount.StoreOf(path); serr == nil && len(args) > 0 && sameFile(s, path) {
				store, rel, err = s, ".", nil // the store itself: its whole tree
			}
			if err != nil {
				return err
			}
		}
	}
	t := mount.Target{Path: rel, File: h.id}
	if t.File != 0 && (len(args) == 0 || rel == ".") {
		t.Path = "" // a deleted file's own last path
	}
	return withController(cmd, store, readOnly, func(c mount.Controller) error { return fn(c, t) })
}

// sameFile reports whether paths a and b name the same directory.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// noteDeleted says on stderr that a path named a deleted file's history,
// unless --id named the file.
func (h *historyTarget) noteDeleted(cmd *cobra.Command, f mount.FileInfo) {
	if f.Deleted && h.id == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "deltafs: %s was deleted: file %d, the newest deleted file that was there ('deltafs log --deleted' lists them, --id picks one)\n", f.Path, f.File)
	}
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
