package main

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestOfflineWarningIsOneLine: a warning of repack (a memory limit below
// what one job holds) is one plain line on stderr, as the command's
// errors are: no time, no level, no key=value record.
func TestOfflineWarningIsOneLine(t *testing.T) {
	dir := makeStore(t, 1, 3)
	r := runBinary(t, nil, "repack", "--memory-limit", "1", dir)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	line := regexp.MustCompile(`^deltafs: repack: memory limit below one job's texts; using window 1 \(limit 1, largest \d+\)\n$`)
	if !line.MatchString(r.stderr) {
		t.Fatalf("stderr %q: want one line matching %s", r.stderr, line)
	}
}

// TestPlainHandler: attributes, groups and Info records.
func TestPlainHandler(t *testing.T) {
	var buf bytes.Buffer
	root := &cobra.Command{Use: "deltafs"}
	sub := &cobra.Command{Use: "gc"}
	root.AddCommand(sub)
	sub.SetErr(&buf)
	log := offlineLogger(sub)
	log.Info("not shown")
	log.With("store", "/x").WithGroup("put").Warn("two\nlines", "err", errors.New("a  b"), slog.Group("g", "k", 1))
	want := "deltafs: gc: two lines (store /x, put.err a b, put.g.k 1)\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
	if strings.Contains(buf.String(), "level=") {
		t.Fatal("a level in the line")
	}
}
