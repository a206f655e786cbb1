package main

import (
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
	"github.com/spf13/cobra"
)

// newVerifyCmd builds "deltafs verify".
func newVerifyCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [--json] STORE",
		Short: "Check every revision of an unmounted store",
		Long: `Check every revision of STORE: its record's checksum, the agreement of
the record with the index, the rebuild of its whole delta chain and the
content hash of the result. Every problem is reported on stdout with the
file (id and name) and revision it affects.

Exit status: 0 when the store is clean, 8 when problems were found, and
another non-zero status when verify could not run (4: the store is in
use, 5: not a deltafs store).

The store must not be mounted: verify takes the store lock, as the mount
does, so unmount it first. A progress bar is shown when stderr is a
terminal.`,
		Example: `  deltafs verify ~/work.dfs
  deltafs verify --json ~/work.dfs > report.json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd, args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// verifyProblem is one problem as the JSON report lists it.
type verifyProblem struct {
	File  index.FileID `json:"file"`
	Name  string       `json:"name"`
	Rev   index.Rev    `json:"rev"`
	Error string       `json:"error"`
}

// verifyResult is the JSON report.
type verifyResult struct {
	Store     string          `json:"store"`
	Files     int64           `json:"files"`
	Revisions int64           `json:"revisions"`
	Clean     bool            `json:"clean"`
	Problems  []verifyProblem `json:"problems"`
}

// problemsError says verify ran and found problems (exit code exitProblems).
type problemsError struct {
	n     int
	store string
}

func (e *problemsError) Error() string {
	return fmt.Sprintf("%d problems found in %s", e.n, e.store)
}

// runVerify verifies the store and reports what it found.
func runVerify(cmd *cobra.Command, store string, asJSON bool) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := objstore.Open(store, objstore.Config{Holder: "verify"})
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	res := verifyResult{Store: store, Files: st.Files, Revisions: st.Revisions, Problems: []verifyProblem{}}
	out := cmd.OutOrStdout()
	bar := newProgressBar(cmd.ErrOrStderr(), "verify")
	report := func(p objstore.Problem) {
		vp := verifyProblem{File: p.Rev.File, Rev: p.Rev.Rev, Error: p.Err.Error()}
		if m, err := s.File(p.Rev.File); err == nil {
			vp.Name = m.Name
		}
		res.Problems = append(res.Problems, vp)
		if !asJSON {
			bar.clear()
			fmt.Fprintf(out, "file %d (%s) revision %d: %s\n", vp.File, vp.Name, vp.Rev, vp.Error)
		}
	}
	progress := func(done, total int) { bar.update(int64(done), int64(total), 0, 0) }
	n, err := s.VerifyProgress(ctx, report, progress)
	bar.finish()
	if err != nil {
		return fmt.Errorf("verify stopped after %d problems: %w", n, err)
	}
	res.Clean = n == 0
	if asJSON {
		if err := writeJSON(out, res); err != nil {
			return err
		}
	} else {
		verdict := "clean"
		if n > 0 {
			verdict = fmt.Sprintf("%d problems", n)
		}
		fmt.Fprintf(out, "verified %d revisions of %d files in %s: %s\n", res.Revisions, res.Files, store, verdict)
	}
	if n > 0 {
		return &problemsError{n: n, store: store}
	}
	return nil
}

// isProblems reports whether err says verify found problems.
func isProblems(err error) bool {
	var pe *problemsError
	return errors.As(err, &pe)
}
