package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newVersionCmd builds "deltafs version".
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the deltafs version, Go version, platform and store format",
		Long: `Print the deltafs version (set at build time with
-ldflags "-X main.version=...", else the module version recorded by the Go
toolchain), the Go toolchain that built the binary, the platform, and the
on-disk store format version this build reads and writes.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, l := range currentVersion().lines() {
				if _, err := fmt.Fprintln(cmd.OutOrStdout(), l); err != nil {
					return fmt.Errorf("write: %w", err)
				}
			}
			return nil
		},
	}
}
