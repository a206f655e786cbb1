package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// newSnapshotCmd builds "deltafs snapshot" and its subcommands.
func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Create, list, delete and rename snapshots of a store",
		Long: `Snapshots are read-only copies of the whole tree, shown under
MOUNTPOINT/.snapshots/NAME. Each command takes the store directory, or any
path inside a deltafs mount; a mounted store is reached through its
running mount (which answers only the user who mounted it, and root), an
unmounted one is opened directly.`,
		Args: noSubcommand,
		RunE: showHelp,
	}
	cmd.AddCommand(newSnapCreateCmd(), newSnapListCmd(), newSnapDeleteCmd(), newSnapRenameCmd())
	return cmd
}

// withController runs fn with the Controller of the store at target.
func withController(cmd *cobra.Command, target string, readOnly bool, fn func(mount.Controller) error) error {
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
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

func newSnapCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "create STORE|PATH NAME",
		Short:   "Take a snapshot of the whole tree called NAME",
		Example: "  deltafs snapshot create ~/work before-refactor",
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := index.CheckName(args[1]); err != nil {
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
		Short: "List snapshots, oldest first: name and UTC time",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withController(cmd, args[0], true, func(c mount.Controller) error {
				list, err := c.ListSnapshots(cmd.Context())
				if err != nil {
					return err
				}
				return printSnapshots(cmd.OutOrStdout(), list, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {id, name, time}")
	return cmd
}

func printSnapshots(w io.Writer, list []index.Snapshot, asJSON bool) error {
	if asJSON {
		out := make([]mount.SnapshotInfo, len(list))
		for i, s := range list {
			out[i] = mount.SnapshotInfo{ID: uint64(s.ID), Name: s.Name, Time: time.Unix(0, s.Time).UTC()}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, s := range list {
		if _, err := fmt.Fprintf(w, "%s\t%s\n", s.Name, snapTime(s)); err != nil {
			return err
		}
	}
	return nil
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
				return c.DeleteSnapshot(cmd.Context(), args[1])
			})
		},
	}
}

func newSnapRenameCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rename STORE|PATH OLD NEW",
		Short: "Rename the snapshot OLD to NEW",
		Args:  exactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := index.CheckName(args[2]); err != nil {
				return &usageError{err: err}
			}
			return withController(cmd, args[0], false, func(c mount.Controller) error {
				return c.RenameSnapshot(cmd.Context(), args[1], args[2])
			})
		},
	}
}
