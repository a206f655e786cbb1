package main

import (
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/mount"
	"github.com/deltafs/deltafs/objstore"
	"github.com/spf13/cobra"
)

// newVerifyCmd builds "deltafs verify".
func newVerifyCmd() *cobra.Command {
	var asJSON bool
	var storeOf func(args []string) string
	cmd := &cobra.Command{
		Use:   "verify [--json] STORE",
		Short: "Check every revision, snapshot and live file of a store",
		Long: `Check the whole of STORE:

  - every revision: its index row, its record's checksum and agreement
    with the index, the rebuild of its whole delta chain and the content
    hash of the result;
  - index and segments agree both ways: no index entry points outside
    the data, and every committed segment byte is a record some entry
    points at;
  - every snapshot: each directory tree is there, decodes and hashes to
    its name, each file names a revision that exists, reads back and has
    the file's size, and the snapshot's reference set is exactly the
    revisions its tree names;
  - every live file holds what its last recorded revision holds, unless
    a change is pending (the file is open for writing in a running mount,
    or a mount stopped before recording it and the next mount will).

Bad bytes in the index's own files (badger's tables, MANIFEST) are one
problem naming the index as corrupt: nothing else can be checked.

Every problem is reported on stdout with where it is (a snapshot path, a
live path, a segment offset) and the file (id and name) and revision it
affects.

A mounted store is verified through the running mount (read-only; STORE
may be the store or any path inside the mount); an unmounted one is
opened and locked, as the mount would.

Exit status: 0 when the store is clean, 8 when problems were found, and
another non-zero status when verify could not run (4: the store is in
use, 5: not a deltafs store). A progress bar is shown when stderr is a
terminal.`,
		Example: `  deltafs verify ~/work.dfs
  deltafs verify ~/work          # a mounted store, through its mount
  deltafs verify --json ~/work.dfs > report.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd, storeOf(args), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	storeOf = storeFlag(cmd)
	return cmd
}

// verifyProblem is one problem as the JSON report lists it.
type verifyProblem struct {
	Kind  objstore.ProblemKind `json:"kind"`
	File  index.FileID         `json:"file"`
	Name  string               `json:"name"`
	Rev   index.Rev            `json:"rev"`
	Path  string               `json:"path,omitempty"`
	Error string               `json:"error"`
}

// verifyResult is the JSON report.
type verifyResult struct {
	Store     string          `json:"store"`
	Mounted   bool            `json:"mounted"`
	Files     int64           `json:"files"`
	Revisions int64           `json:"revisions"`
	Segments  int64           `json:"segments"`
	Snapshots int64           `json:"snapshots"`
	Trees     int64           `json:"trees"`
	LiveFiles int64           `json:"live_files"`
	Lost      int64           `json:"lost"`         // revisions a salvage kept as lost (not problems)
	Pending   int64           `json:"live_pending"` // change not recorded yet: open for writing, or left to the next mount
	Clean     bool            `json:"clean"`
	Problems  []verifyProblem `json:"problems"`
	// InterruptedRepack: bytes a killed repack left in STORE/repack/
	// (not a problem).
	InterruptedRepack int64 `json:"interrupted_repack_bytes,omitempty"`
}

// problemsError says verify ran and found problems (exit code exitProblems).
type problemsError struct {
	n     int
	store string
}

func (e *problemsError) Error() string {
	return fmt.Sprintf("%s found in %s", count(e.n, "problem"), e.store)
}

// runVerify verifies the store, through its mount if it is mounted, and
// reports what it found.
func runVerify(cmd *cobra.Command, arg string, asJSON bool) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	store, err := mount.StoreOf(arg)
	if err != nil {
		return err
	}
	res := verifyResult{Store: arg, Problems: []verifyProblem{}}
	out := cmd.OutOrStdout()
	bar := newProgressBar(cmd.ErrOrStderr(), "verify")
	report := func(p mount.ProblemInfo) {
		vp := verifyProblem(p)
		res.Problems = append(res.Problems, vp)
		if !asJSON {
			bar.clear()
			printProblem(out, vp)
		}
	}
	progress := func(p objstore.VerifyProgress) {
		if bar != nil {
			bar.label = "verify " + p.Phase
		}
		bar.update(p.Done, p.Total, 0, 0)
	}
	rep, err := mount.VerifyMounted(ctx, store, func(m mount.VerifyMessage) {
		if m.Problem != nil {
			report(*m.Problem)
		}
		if m.Progress != nil {
			progress(*m.Progress)
		}
	})
	res.Mounted = err == nil
	if res.Mounted {
		// The report names the store, not the path inside its mount
		// ("verify ." in the mount) that led to it.
		res.Store = store
	}
	if errors.Is(err, mount.ErrNotMounted) {
		rep, err = verifyOffline(cmd, store, report, progress)
	}
	if errors.Is(err, index.ErrCorrupt) {
		// Bad bytes in badger's files: a problem found, not a failure
		// to run (exit 8).
		report(mount.ProblemInfo{Kind: objstore.ProblemIndex, Path: "index", Error: err.Error()})
		err = nil
	}
	bar.finish()
	if err != nil && len(res.Problems) > 0 {
		return fmt.Errorf("verify stopped after %s: %w", count(len(res.Problems), "problem"), err)
	}
	if err != nil {
		return err
	}
	return finishVerify(out, res, rep, asJSON)
}

// verifyOffline opens and locks the unmounted store and verifies it.
func verifyOffline(cmd *cobra.Command, store string, report func(mount.ProblemInfo), progress func(objstore.VerifyProgress)) (mount.VerifyReport, error) {
	s, err := objstore.Open(store, objstore.Config{Holder: "verify"})
	if err != nil {
		return mount.VerifyReport{}, err
	}
	defer s.Close()
	return mount.VerifyOffline(cmd.Context(), s, store, func(p objstore.Problem) { report(mount.InfoOf(p, s)) }, progress)
}

// printProblem prints one problem line: a revision's as "file F (NAME)
// revision R: ERROR", anything else as "WHERE (file F revision R): ERROR".
func printProblem(w io.Writer, p verifyProblem) {
	switch {
	case p.Path == "":
		fmt.Fprintf(w, "file %d (%s) revision %d: %s\n", p.File, p.Name, p.Rev, p.Error)
	case p.File == 0:
		fmt.Fprintf(w, "%s: %s\n", p.Path, p.Error)
	default:
		fmt.Fprintf(w, "%s (file %d (%s) revision %d): %s\n", p.Path, p.File, p.Name, p.Rev, p.Error)
	}
}

// finishVerify prints the summary (or the JSON report) and returns a
// problemsError if there were problems.
func finishVerify(out io.Writer, res verifyResult, rep mount.VerifyReport, asJSON bool) error {
	st := rep.Store
	res.Files, res.Revisions, res.Segments, res.Snapshots, res.Trees = st.Files, st.Revisions, st.Segments, st.Snapshots, st.Trees
	res.Lost = st.Lost
	res.LiveFiles, res.Pending = rep.Live.Files, rep.Live.Pending
	res.InterruptedRepack = rep.InterruptedRepack
	n := len(res.Problems)
	res.Clean = n == 0
	if asJSON {
		if err := writeJSON(out, res); err != nil {
			return err
		}
	} else {
		verdict := "clean"
		if n > 0 {
			verdict = count(n, "problem")
		}
		if res.Pending > 0 {
			hold := "hold changes"
			if res.Pending == 1 {
				hold = "holds a change"
			}
			verdict += fmt.Sprintf(" (%s %s not recorded yet: open for writing, or left to the next mount)", count(res.Pending, "live file"), hold)
		}
		if res.Lost > 0 {
			verdict += fmt.Sprintf("; %s lost to damage, kept by a salvage as lost (a read of one is an I/O error)", count(res.Lost, "revision"))
		}
		if res.InterruptedRepack > 0 {
			verdict += fmt.Sprintf("; an interrupted repack left %d bytes in its repack/ (the next repack with the same options resumes it, any other discards it)", res.InterruptedRepack)
		}
		fmt.Fprintf(out, "verified %s of %s, %s (%s) and %s in %s: %s\n",
			count(res.Revisions, "revision"), count(res.Files, "file"), count(res.Snapshots, "snapshot"),
			count(res.Trees, "tree"), count(res.LiveFiles, "live file"), res.Store, verdict)
	}
	if n > 0 {
		return &problemsError{n: n, store: res.Store}
	}
	return nil
}

// isProblems reports whether err says verify found problems.
func isProblems(err error) bool {
	var pe *problemsError
	return errors.As(err, &pe)
}
