package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/internal/testutil"
)

// pair returns a deterministic base and a target made from it by a few
// edits: a replaced run, an insertion and a deletion.
func pair() (base, target []byte) {
	base = testutil.Bytes(1, 200_000)
	target = append([]byte{}, base[:50_000]...)
	target = append(target, testutil.Bytes(2, 300)...)        // inserted
	target = append(target, base[50_000:120_000]...)          //
	target = append(target, bytes.Repeat([]byte{'x'}, 64)...) // replaces 100 bytes
	target = append(target, base[120_100:190_000]...)         // last 10,000 deleted
	return base, target
}

func TestDeltaRoundTripFiles(t *testing.T) {
	base, target := pair()
	dir := t.TempDir()
	bp := writeFile(t, dir, "base", base)
	tp := writeFile(t, dir, "target", target)
	for _, codec := range codecNames {
		t.Run(codec, func(t *testing.T) {
			dp := filepath.Join(dir, codec+".delta")
			op := filepath.Join(dir, codec+".out")
			if r := runCLI(t, nil, "delta", "encode", "--codec", codec, "-o", dp, bp, tp); r.code != exitOK || r.stdout != "" || r.stderr != "" {
				t.Fatalf("encode: %+v", r)
			}
			d, err := os.ReadFile(dp)
			if err != nil {
				t.Fatal(err)
			}
			if len(d) > len(target)/10 {
				t.Errorf("delta of a small edit is %d bytes for a %d-byte target", len(d), len(target))
			}
			if r := runCLI(t, nil, "delta", "apply", "-o", op, bp, dp); r.code != exitOK || r.stderr != "" {
				t.Fatalf("apply: %+v", r)
			}
			got, err := os.ReadFile(op)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, target) {
				t.Fatalf("round trip through files differs: %d bytes, want %d", len(got), len(target))
			}
		})
	}
}

func TestDeltaRoundTripStdio(t *testing.T) {
	base, target := pair()
	dir := t.TempDir()
	bp := writeFile(t, dir, "base", base)
	tp := writeFile(t, dir, "target", target)

	// target from stdin, delta to stdout
	enc := runCLI(t, bytes.NewReader(target), "delta", "encode", bp, "-")
	if enc.code != exitOK || enc.stderr != "" {
		t.Fatalf("encode: exit %d, stderr %q", enc.code, enc.stderr)
	}
	// base from stdin gives the same delta
	enc2 := runCLI(t, bytes.NewReader(base), "delta", "encode", "-", tp)
	if enc2.stdout != enc.stdout {
		t.Fatalf("delta with base on stdin differs from delta with target on stdin")
	}
	// delta from stdin, target to stdout ("-o -" is stdout too)
	app := runCLI(t, strings.NewReader(enc.stdout), "delta", "apply", "-o", "-", bp, "-")
	if app.code != exitOK || app.stderr != "" || app.stdout != string(target) {
		t.Fatalf("apply: exit %d, stderr %q, %d bytes", app.code, app.stderr, len(app.stdout))
	}
	// base from stdin, delta from a file
	dp := writeFile(t, dir, "delta", []byte(enc.stdout))
	app2 := runCLI(t, bytes.NewReader(base), "delta", "apply", "-", dp)
	if app2.code != exitOK || app2.stdout != string(target) {
		t.Fatalf("apply with base on stdin: exit %d, stderr %q", app2.code, app2.stderr)
	}
}

func TestDeltaCodecs(t *testing.T) {
	base, target := pair()
	dir := t.TempDir()
	bp := writeFile(t, dir, "base", base)
	tp := writeFile(t, dir, "target", target)
	size := map[string]int{}
	for _, codec := range codecNames {
		r := runCLI(t, nil, "delta", "encode", "-c", codec, bp, tp)
		if r.code != exitOK {
			t.Fatalf("%s: %q", codec, r.stderr)
		}
		c, _, _, err := delta.Header([]byte(r.stdout))
		if err != nil {
			t.Fatalf("%s: header: %v", codec, err)
		}
		if want := map[string]delta.Codec{"copy": delta.CodecCopy, "zstd": delta.CodecZstd}[codec]; want != 0 && c != want {
			t.Errorf("--codec %s wrote a %v delta", codec, c)
		}
		size[codec] = len(r.stdout)
	}
	if size["best"] != min(size["copy"], size["zstd"]) {
		t.Errorf("best is %d bytes; copy %d, zstd %d", size["best"], size["copy"], size["zstd"])
	}
	if r := runCLI(t, nil, "delta", "encode", bp, tp); r.code != exitOK || len(r.stdout) != size["copy"] {
		t.Errorf("default codec is not copy: %d bytes, copy gives %d", len(r.stdout), size["copy"])
	}
}

func TestDeltaBadInput(t *testing.T) {
	base, target := pair()
	dir := t.TempDir()
	bp := writeFile(t, dir, "base", base)
	tp := writeFile(t, dir, "target", target)
	good := delta.Encode(base, target)
	otherBase := writeFile(t, dir, "other", base[:1000])
	tests := []struct {
		name  string
		delta []byte
		args  []string // BASE and DELTA or TARGET, "DELTA" replaced by the delta file
		want  string
	}{
		{"missing base", nil, []string{"encode", filepath.Join(dir, "nosuch"), tp}, "no such file or directory"},
		{"missing target", nil, []string{"encode", bp, filepath.Join(dir, "nosuch")}, "no such file or directory"},
		{"missing delta", nil, []string{"apply", bp, filepath.Join(dir, "nosuch")}, "no such file or directory"},
		{"empty delta", []byte{}, []string{"apply", bp, "DELTA"}, "delta apply: "},
		{"garbage delta", []byte("this is not a delta"), []string{"apply", bp, "DELTA"}, "corrupt delta"},
		{"truncated delta", good[:len(good)/2], []string{"apply", bp, "DELTA"}, "corrupt delta"},
		{"wrong base", good, []string{"apply", otherBase, "DELTA"}, "wrong base"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"delta"}, tt.args...)
			for i, a := range args {
				if a == "DELTA" {
					args[i] = writeFile(t, t.TempDir(), "delta", tt.delta)
				}
			}
			requireOneErrorLine(t, runCLI(t, nil, args...), exitFailure, tt.want)
			requireOneErrorLine(t, runCLI(t, nil, append(args, "-o", out)...), exitFailure, tt.want)
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("failed command left an output file (stat: %v)", err)
			}
		})
	}
}

func TestDeltaRefusesTerminal(t *testing.T) {
	tty, closeTTY := openTTY(t)
	defer closeTTY()
	dir := t.TempDir()
	bp := writeFile(t, dir, "base", []byte("hello"))
	var errOut bytes.Buffer
	code := run([]string{"delta", "encode", bp, bp}, strings.NewReader(""), tty, &errOut)
	if code != exitUsage || !strings.Contains(errOut.String(), "terminal") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	out := filepath.Join(dir, "d")
	code = run([]string{"delta", "encode", "-o", out, bp, bp}, strings.NewReader(""), tty, &errOut)
	if _, err := os.Stat(out); code != exitOK || err != nil {
		t.Fatalf("with -o: exit %d, stat %v", code, err)
	}
}

func TestIsTerminal(t *testing.T) {
	tty, closeTTY := openTTY(t)
	defer closeTTY()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	if !isTerminal(tty) || isTerminal(devNull) {
		t.Fatalf("isTerminal: pty %v, /dev/null %v", isTerminal(tty), isTerminal(devNull))
	}
}
