package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// rootLong is the one-paragraph description shown by "deltafs --help".
const rootLong = `deltafs is a versioned FUSE filesystem for Linux. Every close or fsync
of a changed file records a revision, stored as a binary delta against the
best of its parents in an append-only revlog indexed by badger; read-only
snapshots appear under .snapshots/, delta chains are capped so that old
revisions stay fast to read, and an offline repack rewrites the store.
"deltafs mount STORE MOUNTPOINT" is where to start.`

// run executes the deltafs command line args (without the program name)
// with the given standard streams and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(append([]string{}, args...)) // non-nil: never fall back to os.Args
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	strictTopics(root)
	cmd, err := root.ExecuteContextC(context.Background())
	if err != nil {
		fmt.Fprintln(stderr, errorLine(cmd, err))
	}
	return exitCode(err)
}

// newRootCmd builds the whole command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "deltafs",
		Short:         "A versioned FUSE filesystem that stores every revision as a delta",
		Long:          rootLong,
		Version:       currentVersion().version,
		Args:          noSubcommand,
		RunE:          showHelp,
		SilenceUsage:  true,
		SilenceErrors: true, // run prints the one error line itself
		// cobra adds "deltafs completion bash|zsh|fish|powershell" itself.
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err: flagValueError(err)}
	})
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.AddCommand(newVersionCmd(), newDeltaCmd(), newMountCmd(), newUmountCmd(), newRepackCmd(), newGCCmd(), newSalvageCmd(), newVerifyCmd(), newSnapshotCmd(), newStatsCmd(), newLogCmd(), newCatCmd(), newRestoreCmd())
	return root
}

// errorLine formats err as the single line deltafs prints on stderr:
// "deltafs: <subcommand path>: <message>", with a pointer to --help for
// usage errors. The message stays one line: the lines of joined errors
// (errors.Join) are separated by "; ", other whitespace runs folded.
func errorLine(cmd *cobra.Command, err error) string {
	var b strings.Builder
	b.WriteString("deltafs: ")
	if cmd != nil && cmd.HasParent() {
		b.WriteString(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "))
		b.WriteString(": ")
	}
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	b.WriteString(strings.Join(lines, "; "))
	if mnt, ok := mount.Unmounting(err); ok {
		fmt.Fprintf(&b, ": it is unmounting from %s, and records what was pending before it lets the store go; try again once 'deltafs umount' returns", mnt)
	}
	if exitCode(err) == exitUsage && cmd != nil {
		fmt.Fprintf(&b, " (see '%s --help')", cmd.CommandPath())
	}
	return b.String()
}

// showHelp is the action of a command that only groups subcommands: with
// no arguments it prints its help.
func showHelp(cmd *cobra.Command, _ []string) error {
	return cmd.Help()
}

// noSubcommand rejects positional arguments on a command that only groups
// subcommands, i.e. an unknown subcommand, suggesting close names.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, applied lazily by cobra itself
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return &usageError{err: fmt.Errorf("%s", msg)}
}

// exactArgs is cobra.ExactArgs returning a usageError.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("expects %s, got %d", count(n, "argument"), len(args))
		}
		return nil
	}
}

// count writes n and the noun, in the plural unless n is 1: "1 problem",
// "0 problems", "2 live files".
func count[N ~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// flagValueError says why a flag's value was refused in words, not in
// those of Go's parsers: pflag's `invalid argument "99999999999999999999"
// for "--rev" flag: strconv.ParseInt: parsing "99999999999999999999":
// value out of range` ends "...flag: out of range" instead.
func flagValueError(err error) error {
	cause := errors.Unwrap(err)
	if cause == nil {
		return err
	}
	var why string
	var num *strconv.NumError
	switch {
	case errors.As(cause, &num) && num.Func == "ParseBool":
		why = "want true or false"
	case errors.As(cause, &num) && errors.Is(num.Err, strconv.ErrRange):
		why = "out of range"
	case errors.As(cause, &num) && num.Func == "ParseUint" && strings.HasPrefix(num.Num, "-"):
		why = "must not be negative"
	case errors.As(cause, &num) && num.Func == "ParseFloat":
		why = "not a number"
	case errors.As(cause, &num):
		why = "not a whole number"
	case strings.HasPrefix(cause.Error(), "time: "):
		why = "not a duration (e.g. 90s, 1h30m)"
	default:
		return err
	}
	msg, ok := strings.CutSuffix(err.Error(), cause.Error())
	if !ok {
		return err
	}
	return errors.New(msg + why)
}

// storeFlag gives a command that takes STORE as its one argument (stats,
// verify, gc, repack) the --store flag of the history commands too, so
// that "deltafs stats --store S" works as "deltafs log --store S PATH"
// does. Its Args accept the store either way, not both; storeOf returns
// it.
func storeFlag(cmd *cobra.Command) (storeOf func(args []string) string) {
	var store string
	cmd.Flags().StringVar(&store, "store", "", "the store `STORE`, instead of the argument (as log, cat and restore take it)")
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		switch {
		case store != "" && len(args) > 0:
			return usageErrorf("give the store as an argument or with --store, not both")
		case store == "" && len(args) != 1:
			return usageErrorf("expects 1 argument, got %d (the store, or give it with --store)", len(args))
		}
		return nil
	}
	return func(args []string) string {
		if len(args) > 0 {
			return args[0]
		}
		return store
	}
}
