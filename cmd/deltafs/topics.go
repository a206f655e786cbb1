package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// strictTopics makes an unknown help topic ("deltafs help nosuch") or
// completion shell ("deltafs completion nosh") a usage error, as an
// unknown command is; cobra's own commands print the general help and
// succeed. It sets up cobra's help and completion commands itself, so
// it runs after the output streams are set: the completion scripts are
// written to the stdout their commands are made with.
func strictTopics(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Args = helpTopic
		case "completion":
			c.Args, c.RunE = completionShell, showHelp
			for _, shell := range c.Commands() {
				shell.Args = exactArgs(0) // cobra's: exit 1
			}
		}
	}
}

// helpTopic accepts the arguments of "deltafs help" that name a command.
func helpTopic(cmd *cobra.Command, args []string) error {
	if c, rest, err := cmd.Root().Find(args); err != nil || c == nil || len(rest) > 0 {
		return usageErrorf("unknown help topic %q", strings.Join(args, " "))
	}
	return nil
}

// completionShell refuses an argument of "deltafs completion" that is no
// shell it knows (a known one runs its own subcommand).
func completionShell(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var shells []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			shells = append(shells, s.Name())
		}
	}
	return usageErrorf("unknown shell %q: give %s", args[0], strings.Join(shells, ", "))
}
