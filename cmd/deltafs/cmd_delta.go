package main

import (
	"errors"
	"fmt"

	"github.com/deltafs/deltafs/delta"
	"github.com/spf13/cobra"
)

// zstdLevel is the klauspost/compress encoder level the CLI uses for the
// zstd codec: 3 (SpeedBetterCompression). A person running the CLI by
// hand cares more about the size than about the last factor of speed,
// and level 4 costs several times more CPU for a few percent.
const zstdLevel = 3

// newDeltaCmd builds "deltafs delta" and its subcommands.
func newDeltaCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delta",
		Short: "Compute and apply binary deltas between files",
		Long: `Compute and apply binary deltas with the engine deltafs stores revisions
with. A delta turns a BASE file into a TARGET file; it is useful only
together with the exact base it was made against.

Files are read whole into memory. Any one input may be "-" for stdin.
Output goes to stdout, or to the file named by -o; to protect a terminal
from binary output, writing to a terminal needs -o (use "-o /dev/stdout"
to insist).`,
		Args: noSubcommand,
		RunE: showHelp,
	}
	cmd.AddCommand(newDeltaEncodeCmd(), newDeltaApplyCmd())
	return cmd
}

// newDeltaEncodeCmd builds "deltafs delta encode".
func newDeltaEncodeCmd() *cobra.Command {
	var out string
	c := codecCopy
	cmd := &cobra.Command{
		Use:   "encode [--codec copy|zstd|best] [-o FILE] BASE TARGET",
		Short: "Write the delta that turns BASE into TARGET",
		Long: `Write the delta that turns BASE into TARGET to stdout, or to FILE with -o.

Codecs:
  copy  copy/insert instructions, fast, cost follows the size of the
        change (default; uncompressed: compress it yourself if you store it)
  zstd  TARGET compressed by zstd with BASE as its dictionary
        (like "zstd --patch-from"); BASE+TARGET must fit in 512 MiB
  best  both, keeping the smaller

One of BASE and TARGET may be "-" for stdin. Binary output is not
written to a terminal; redirect stdout or use -o.`,
		Example: `  deltafs delta encode old.bin new.bin > new.delta
  deltafs delta encode --codec best -o new.delta old.bin new.bin
  generate | deltafs delta encode old.bin - > new.delta`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEncode(cmd, c, args[0], args[1], out)
		},
	}
	cmd.Flags().VarP(&c, "codec", "c", "delta codec: copy, zstd or best")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the delta to `FILE` instead of stdout")
	_ = cmd.RegisterFlagCompletionFunc("codec", cobra.FixedCompletions(codecNames, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// newDeltaApplyCmd builds "deltafs delta apply".
func newDeltaApplyCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "apply [-o FILE] BASE DELTA",
		Short: "Apply DELTA to BASE and write the target",
		Long: `Apply DELTA (made by "deltafs delta encode" with any codec) to BASE and
write the resulting target to stdout, or to FILE with -o.

One of BASE and DELTA may be "-" for stdin. A delta that is truncated,
corrupt or made against another base is refused with an error and no
output. Binary output is not written to a terminal; redirect stdout or
use -o.`,
		Example: `  deltafs delta apply old.bin new.delta > new.bin
  deltafs delta apply -o new.bin old.bin new.delta`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApply(cmd, args[0], args[1], out)
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the target to `FILE` instead of stdout")
	return cmd
}

// runEncode implements "deltafs delta encode".
func runEncode(cmd *cobra.Command, c codecFlag, basePath, targetPath, out string) error {
	if err := checkOutput(cmd, out); err != nil {
		return err
	}
	in, err := readInputs(cmd.InOrStdin(), basePath, targetPath)
	if err != nil {
		return err
	}
	d, err := encodeWith(c, in[0], in[1])
	if err != nil {
		return err
	}
	return writeOutput(cmd.OutOrStdout(), out, d)
}

// encodeWith returns the delta from base to target with codec c.
func encodeWith(c codecFlag, base, target []byte) ([]byte, error) {
	copyDelta := func() []byte { return delta.Encode(base, target) }
	switch c {
	case codecCopy:
		return copyDelta(), nil
	case codecZstd:
		d, err := delta.EncodeZstd(base, target, zstdLevel)
		if err != nil {
			return nil, fmt.Errorf("zstd codec: %w", err)
		}
		return d, nil
	case codecBest:
		cd := copyDelta()
		zd, err := delta.EncodeZstd(base, target, zstdLevel)
		if err != nil || len(zd) >= len(cd) {
			return cd, nil // zstd cannot take inputs this large, or it lost
		}
		return zd, nil
	}
	return nil, fmt.Errorf("codec %q: %w", string(c), errUnknownCodec)
}

// runApply implements "deltafs delta apply".
func runApply(cmd *cobra.Command, basePath, deltaPath, out string) error {
	if err := checkOutput(cmd, out); err != nil {
		return err
	}
	in, err := readInputs(cmd.InOrStdin(), basePath, deltaPath)
	if err != nil {
		return err
	}
	base, d := in[0], in[1]
	if _, baseLen, _, err := delta.Header(d); err == nil && baseLen != uint64(len(base)) {
		return fmt.Errorf("wrong base: %s was made against a base of %d bytes, %s has %d",
			displayName(deltaPath), baseLen, displayName(basePath), len(base))
	}
	target, err := delta.Apply(base, d)
	if err != nil {
		return err // "corrupt delta: ..." from the delta package
	}
	return writeOutput(cmd.OutOrStdout(), out, target)
}

// codecFlag is the value of --codec.
type codecFlag string

const (
	codecCopy codecFlag = "copy"
	codecZstd codecFlag = "zstd"
	codecBest codecFlag = "best"
)

// codecNames lists the valid --codec values, for help and completion.
var codecNames = []string{string(codecCopy), string(codecZstd), string(codecBest)}

var errUnknownCodec = errors.New("unknown codec")

func (c *codecFlag) String() string { return string(*c) }
func (c *codecFlag) Type() string   { return "codec" }
func (c *codecFlag) Set(s string) error {
	switch v := codecFlag(s); v {
	case codecCopy, codecZstd, codecBest:
		*c = v
		return nil
	}
	return fmt.Errorf("%w %q (want copy, zstd or best)", errUnknownCodec, s)
}
