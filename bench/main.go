package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// childCmd is the hidden subcommand that runs one measurement in a fresh
// process: bench __child SUITE OP ARGS...
const childCmd = "__child"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// suites is the registry: every suite the runner knows, in report order.
func suites() []Suite {
	return []Suite{deltaSuite(), storeSuite(), mountSuite(), historySuite(), repackSuite(), gcSuite(), footprintSuite()}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == childCmd {
		return runChild(ctx, args[1:], stdout)
	}
	if len(args) > 0 && args[0] == historyCmd {
		return writeHistory(args[1:], stdout)
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errors.New("no suite named")
		}
		return nil
	}
	name := args[0]
	opts, err := parseOptions(args[1:], stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	var chosen []Suite
	for _, s := range suites() {
		if name == "all" || s.Name == name {
			chosen = append(chosen, s)
		}
	}
	if len(chosen) == 0 {
		usage(stderr)
		return fmt.Errorf("unknown suite %q", name)
	}
	env, err := newEnv(ctx, opts, name, stdout, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	for _, s := range chosen {
		if err := env.runSuite(s); err != nil {
			return fmt.Errorf("suite %s: %w", s.Name, err)
		}
	}
	return nil
}

func parseOptions(args []string, stderr io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.Runs, "n", 5, "runs per measurement; figures are medians")
	fs.StringVar(&o.OutDir, "out", "bench/out", "directory for the markdown reports")
	fs.StringVar(&o.WorkDir, "work", "", "directory for generated files (default: a fresh temporary directory, removed afterwards)")
	fs.IntVar(&o.SlowRuns, "slow-n", 3, "runs per measurement of the slow codecs (deltafs zstd-dict, zstd -19), at most -n")
	fs.IntVar(&o.VCSRuns, "vcs-n", 1, "runs per measurement of the slow git and Mercurial ingests and repacks (store suite), at most -n")
	fs.IntVar(&o.ChainSample, "chain-sample", 10, "revisions of a long chain that a slow baseline encodes (evenly spaced); totals are scaled to the whole chain")
	fs.StringVar(&o.Only, "only", "", "run only these benchmarks of the suite, comma-separated (e.g. S3 or M1,M3)")
	fs.BoolVar(&o.NoInstall, "no-install", false, "do not try to apt-get install missing baselines")
	fs.StringVar(&o.DeltafsSrc, "deltafs-src", ".", "build the deltafs measured from the checkout in `DIR` (e.g. a git worktree of an older commit, for before/after figures)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.Runs < 1 || o.SlowRuns < 1 || o.VCSRuns < 1 || o.ChainSample < 1 {
		return o, errors.New("-n, -slow-n, -vcs-n and -chain-sample must be at least 1")
	}
	o.SlowRuns, o.VCSRuns = min(o.SlowRuns, o.Runs), min(o.VCSRuns, o.Runs)
	return o, nil
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run ./bench SUITE [flags]   (flags: -h)")
	fmt.Fprintln(w, "suites:")
	fmt.Fprintln(w, "  all\tevery suite below, in order")
	for _, s := range suites() {
		fmt.Fprintf(w, "  %s\t%s\n", s.Name, s.Doc)
	}
}
