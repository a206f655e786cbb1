package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/objstore"
	"github.com/spf13/cobra"
)

// repackFlags are the command-line options of "deltafs repack".
type repackFlags struct {
	opt    objstore.RepackOptions
	reuse  reuseFlag
	memory sizeFlag
	json   bool
}

// newRepackCmd builds "deltafs repack".
func newRepackCmd() *cobra.Command {
	var fl repackFlags
	var storeOf func(args []string) string
	cmd := &cobra.Command{
		Use:   "repack [flags] STORE",
		Short: "Rewrite an unmounted store in its smallest form, choosing every delta base again",
		Long: `Rewrite how every revision of STORE is stored: choose each revision's
delta base again among a window of candidates (its parents, the nearest
earlier revisions of the file, similar files elsewhere in the store and
the file's snapshots), enforce the chain caps given, cutting chains that
exceed them, and write the result into new segments.

Revisions keep their identity and content: only where and how each one
is stored changes. The new segments are switched to atomically; a crash
or kill at any moment leaves a store that reads every revision, and an
interrupted repack continues where it stopped when run again with the
same options.

--reuse=auto (the default) keeps an existing delta byte for byte when it
meets the caps and is small; larger ones are re-examined and replaced
only by a clearly (10%) smaller one. --reuse=never recomputes every
revision: slower, sometimes smaller.

The store must not be mounted: repack takes the store lock, as the mount
does. A progress bar is shown when stderr is a terminal.`,
		Example: `  deltafs repack ~/work.dfs
  deltafs repack --reuse=never --window 50 --max-chain 64 ~/work.dfs
  deltafs repack --memory-limit 2GiB --json ~/work.dfs`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRepack(cmd, storeOf(args), fl)
		},
	}
	f := cmd.Flags()
	f.IntVar(&fl.opt.Window, "window", objstore.DefaultRepackWindow, "try the `N` nearest earlier revisions of a file as bases")
	f.Uint32Var(&fl.opt.MaxChain, "max-chain", objstore.DefaultMaxChainLen, "at most `N` deltas to apply to read a revision")
	f.Float64Var(&fl.opt.MaxReadRatio, "max-read-ratio", objstore.DefaultMaxReadRatio, "a chain reads at most `R` times its text's size")
	f.Var(&fl.reuse, "reuse", "keep existing deltas verbatim: auto or never")
	f.IntVar(&fl.opt.Jobs, "jobs", 0, "repack `N` files, and compute N candidate deltas, at once (default: the number of CPUs)")
	f.Var(&fl.memory, "memory-limit", "bound the texts held in memory to `SIZE` (e.g. 512MiB, 2G); default: half the RAM")
	f.BoolVar(&fl.json, "json", false, "print the report as JSON")
	_ = cmd.RegisterFlagCompletionFunc("reuse", cobra.FixedCompletions([]string{"auto", "never"}, cobra.ShellCompDirectiveNoFileComp))
	storeOf = storeFlag(cmd)
	return cmd
}

// runRepack repacks the store and prints the report.
func runRepack(cmd *cobra.Command, store string, fl repackFlags) error {
	if fl.opt.Window < 1 || fl.opt.MaxChain < 1 || !(fl.opt.MaxReadRatio > 0) || math.IsInf(fl.opt.MaxReadRatio, 0) || fl.opt.Jobs < 0 {
		return usageErrorf("--window, --max-chain and --max-read-ratio must be positive (the ratio a finite number), --jobs not negative")
	}
	if err := checkStorePath(store); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fl.opt.Reuse, fl.opt.MemoryLimit = objstore.Reuse(fl.reuse), int64(fl.memory)
	fl.opt.Logger = offlineLogger(cmd)
	bar := newProgressBar(cmd.ErrOrStderr(), "repack")
	if bar != nil {
		fl.opt.Progress = func(p objstore.RepackProgress) {
			bar.update(p.Done, p.Revisions, p.Bytes, p.TotalBytes)
		}
	}
	if path := os.Getenv(envCPUProfile); path != "" {
		stopProfile, err := startCPUProfile(path)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	rep, err := objstore.Repack(ctx, store, fl.opt)
	bar.finish()
	if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
		return fmt.Errorf("interrupted; run it again with the same options to resume: %w", err)
	}
	if err != nil {
		return err
	}
	if fl.json {
		return writeJSON(cmd.OutOrStdout(), struct {
			Store string `json:"store"`
			objstore.RepackReport
		}{store, rep})
	}
	printRepackReport(cmd.OutOrStdout(), store, rep)
	return nil
}

// printRepackReport writes the human report.
func printRepackReport(w io.Writer, store string, r objstore.RepackReport) {
	fmt.Fprintf(w, "repacked %s: %s of %s in %s, peak memory %s\n",
		store, count(r.Revisions, "revision"), count(r.Files, "file"), r.Duration.Round(time.Millisecond), humanSize(uint64(r.PeakRSS)))
	if r.Whole {
		fmt.Fprintf(w, "  nothing to change: every record and entry kept as it is, the store left untouched\n")
	}
	fmt.Fprintf(w, "  size       %s -> %s (%s)\n", humanSize(r.SizeBefore), humanSize(r.SizeAfter), percent(r.SizeBefore, r.SizeAfter))
	fmt.Fprintf(w, "  revisions  %d re-deltaed, %d reused verbatim, %d unchanged", r.Redeltaed, r.Reused, r.Unchanged)
	if r.Resumed {
		fmt.Fprintf(w, ", %d done by the interrupted run resumed", r.ResumedRevisions)
	}
	fmt.Fprintf(w, "\n  chains     max %d -> %d, mean %.1f -> %.1f\n", r.ChainMaxBefore, r.ChainMaxAfter, r.ChainMeanBefore, r.ChainMeanAfter)
	fmt.Fprintf(w, "  window %d, jobs %d\n", r.Window, r.Jobs)
}

func percent(before, after uint64) string {
	if before == 0 {
		return "+0%"
	}
	return fmt.Sprintf("%+.1f%%", 100*(float64(after)-float64(before))/float64(before))
}

// writeJSON writes v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// reuseFlag is the --reuse value.
type reuseFlag objstore.Reuse

func (f *reuseFlag) String() string { return objstore.Reuse(*f).String() }
func (f *reuseFlag) Type() string   { return "auto|never" }
func (f *reuseFlag) Set(s string) error {
	r, err := objstore.ParseReuse(s)
	if err != nil {
		return err
	}
	*f = reuseFlag(r)
	return nil
}

// sizeFlag is a byte size: a number with an optional K, M, G or T suffix
// (powers of 1024; "KiB", "KB" and "k" all mean the same).
type sizeFlag int64

func (f *sizeFlag) String() string { return strconv.FormatInt(int64(*f), 10) }
func (f *sizeFlag) Type() string   { return "size" }
func (f *sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*f = sizeFlag(n)
	return nil
}

// parseSize parses "123", "512M", "2GiB", "1.5g".
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "b"), "i")
	mult := 1.0
	if i := len(t) - 1; i >= 0 {
		if k := strings.IndexByte("kmgt", t[i]); k >= 0 {
			mult, t = float64(int64(1)<<(10*(k+1))), t[:i]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("bad size %q: want e.g. 512MiB or 2G", s)
	}
	return int64(v * mult), nil
}

// progressBar redraws one status line on a terminal, at most every
// redrawEvery. A nil *progressBar draws nothing.
type progressBar struct {
	w     io.Writer
	label string
	start time.Time
	last  time.Time
	drawn bool
}

// redrawEvery: ten redraws a second look smooth and cost nothing.
const redrawEvery = 100 * time.Millisecond

// newProgressBar returns a bar on w if w is a terminal, else nil.
func newProgressBar(w io.Writer, label string) *progressBar {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return nil
	}
	return &progressBar{w: w, label: label, start: time.Now()}
}

// update redraws the bar if it is time; bytes may be zero when unknown.
func (p *progressBar) update(done, total int64, bytes, totalBytes uint64) {
	if p == nil || (time.Since(p.last) < redrawEvery && done < total) {
		return
	}
	p.last = time.Now()
	p.drawn = true
	fmt.Fprintf(p.w, "\r\033[K%s", progressLine(p.label, done, total, bytes, totalBytes, time.Since(p.start)))
}

// clear erases the bar's line, so that other output starts on a clean one.
func (p *progressBar) clear() {
	if p != nil && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
		p.last = time.Time{}
	}
}

// finish erases the bar for good.
func (p *progressBar) finish() { p.clear() }

// progressLine formats the bar: [####------] done/total, bytes, rate, ETA.
func progressLine(label string, done, total int64, bytes, totalBytes uint64, elapsed time.Duration) string {
	const width = 24
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	if totalBytes > 0 {
		frac = float64(bytes) / float64(totalBytes)
	}
	filled := min(width, int(frac*width))
	line := fmt.Sprintf("%s [%s%s] %d/%d revisions", label, strings.Repeat("#", filled), strings.Repeat("-", width-filled), done, total)
	secs := elapsed.Seconds()
	if totalBytes > 0 && secs > 0 {
		rate := float64(bytes) / secs
		line += fmt.Sprintf("  %s/%s  %s/s", humanSize(bytes), humanSize(totalBytes), humanSize(uint64(rate)))
	}
	if frac > 0 && frac < 1 {
		eta := time.Duration(float64(elapsed) * (1 - frac) / frac)
		line += "  ETA " + eta.Round(time.Second).String()
	}
	return line
}
