package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/deltafs/deltafs/mount"
	"github.com/spf13/cobra"
)

// catJSON is what "deltafs cat --json" prints.
type catJSON struct {
	mount.FileRev
	Data []byte `json:"data"` // base64
}

// newCatCmd builds "deltafs cat".
func newCatCmd() *cobra.Command {
	var t historyTarget
	var rev int64
	var snap string
	cmd := &cobra.Command{
		Use:   "cat PATH [--rev N | --snapshot NAME]",
		Short: "Write one revision of a file to stdout (the newest by default)",
		Long: `Write the content of one revision of the file at PATH to stdout, byte
for byte: revision N (see "deltafs log"), the revision the snapshot NAME
holds, or the newest. PATH is as for "deltafs log": a path where no file
lives now names the newest deleted file whose last path it is; --id N
names file N.`,
		Example: "  deltafs cat ~/work/notes.txt --snapshot before-refactor\n  deltafs cat --store ~/work.dfs notes.txt --rev 3 > old.txt",
		Args:    t.args(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := revSpec(cmd, rev, snap)
			if err != nil {
				return err
			}
			return t.run(cmd, args, true, func(c mount.Controller, target mount.Target) error {
				r, text, err := c.Cat(cmd.Context(), target, spec)
				if err != nil {
					return err
				}
				defer text.Close()
				if t.asJSON {
					// The note after the object: a cat cut off midway
					// says one line, its error (stdout then holds the
					// JSON as far as it got, as a plain cat holds the
					// bytes).
					if err := printCatJSON(stdoutWriter{cmd.OutOrStdout()}, r, text); err != nil {
						return err
					}
					t.noteDeleted(cmd, r.FileInfo)
					return nil
				}
				t.noteDeleted(cmd, r.FileInfo)
				// A big revision is copied out as it is read (from the
				// store's spill file or the control socket), never whole
				// in memory.
				_, err = text.WriteTo(stdoutWriter{cmd.OutOrStdout()})
				return err
			})
		},
	}
	t.flags(cmd, `print one JSON object: path, file, deleted, revision {rev, time, size, ...}, data (base64)`)
	// The zero default is never used (revSpec asks whether --rev was
	// given) and not shown: the help says what leaving it out means.
	cmd.Flags().Int64Var(&rev, "rev", 0, "revision `N` (see 'deltafs log'); default: the newest")
	cmd.Flags().StringVar(&snap, "snapshot", "", "the revision the snapshot `NAME` holds")
	return cmd
}

// printCatJSON prints what printJSON prints of catJSON{r, text's
// bytes}, the text streamed into its base64 as it is read: a big
// revision is never whole in memory (it was, 1x its size and its base64
// on top).
func printCatJSON(w io.Writer, r mount.FileRev, text mount.Text) error {
	var head bytes.Buffer
	if err := printJSON(&head, catJSON{FileRev: r, Data: []byte{}}); err != nil {
		return err
	}
	// data is the last field: its empty value is the last "" printed.
	b := head.Bytes()
	at := bytes.LastIndex(b, []byte(`""`))
	if at < 0 {
		return fmt.Errorf("cat --json: no data field in %q", b)
	}
	if _, err := w.Write(b[:at+1]); err != nil {
		return err
	}
	enc := base64.NewEncoder(base64.StdEncoding, w)
	if _, err := text.WriteTo(enc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(b[at+1:])
	return err
}

// stdoutWriter names stdout in its write errors, which a Text's WriteTo
// returns beside those of its source.
type stdoutWriter struct{ w io.Writer }

func (s stdoutWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		err = fmt.Errorf("write stdout: %w", err)
	}
	return n, err
}

// revSpec turns --rev and --snapshot into a RevSpec; at most one is given.
func revSpec(cmd *cobra.Command, rev int64, snap string) (mount.RevSpec, error) {
	revSet, snapSet := cmd.Flags().Changed("rev"), cmd.Flags().Changed("snapshot")
	switch {
	case revSet && snapSet:
		return mount.RevSpec{}, usageErrorf("give --rev or --snapshot, not both")
	case snapSet && snap == "":
		return mount.RevSpec{}, usageErrorf("--snapshot needs a name")
	case revSet && (rev < 0 || rev >= 1<<32):
		return mount.RevSpec{}, usageErrorf("--rev %d: not a revision number", rev)
	case revSet:
		r := uint32(rev)
		return mount.RevSpec{Rev: &r}, nil
	}
	return mount.RevSpec{Snapshot: mount.ByteString(snap)}, nil
}
