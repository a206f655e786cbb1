package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// stdioName is the file name that stands for stdin (as an input) or
// stdout (as -o).
const stdioName = "-"

// readInputs reads every named input whole; at most one may be "-",
// which reads stdin.
func readInputs(stdin io.Reader, paths ...string) ([][]byte, error) {
	dashes := 0
	for _, p := range paths {
		if p == stdioName {
			dashes++
		}
	}
	if dashes > 1 {
		return nil, usageErrorf("at most one input may be %q (stdin)", stdioName)
	}
	out := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := readInput(stdin, p)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// readInput reads the file at path, or stdin when path is "-".
func readInput(stdin io.Reader, path string) ([]byte, error) {
	if path != stdioName {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read input: %w", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	return b, nil
}

// checkOutput refuses, before any work is done, to write binary data to
// a terminal on stdout: the user most likely forgot a redirection.
func checkOutput(cmd *cobra.Command, out string) error {
	if out != "" && out != stdioName {
		return nil
	}
	if f, ok := cmd.OutOrStdout().(*os.File); ok && isTerminal(f) {
		return usageErrorf("refusing to write binary output to a terminal; redirect stdout or use -o FILE")
	}
	return nil
}

// writeOutput writes data to the file out, or to stdout when out is ""
// or "-". The data is complete before the file is created, so a failed
// command never leaves a truncated output file behind.
func writeOutput(stdout io.Writer, out string, data []byte) error {
	if out == "" || out == stdioName {
		if _, err := stdout.Write(data); err != nil {
			return fmt.Errorf("write stdout: %w", err)
		}
		return nil
	}
	if err := os.WriteFile(out, data, 0o666); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// displayName names an input in messages.
func displayName(path string) string {
	if path == stdioName {
		return "stdin"
	}
	return path
}
