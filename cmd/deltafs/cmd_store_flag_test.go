package main

import (
	"regexp"
	"strings"
	"testing"
)

var digits = regexp.MustCompile(`[0-9.]+`)

// TestStoreFlag: stats, verify, gc and repack take the store with
// --store as the history commands do, or as their argument, not both
// and not neither (usage errors, exit 2).
func TestStoreFlag(t *testing.T) {
	store := newCLIStore(t)
	for _, c := range [][]string{{"stats"}, {"verify"}, {"gc", "--dry-run"}, {"repack"}} {
		byArg := runCLI(t, nil, append(append([]string{}, c...), store)...)
		byFlag := runCLI(t, nil, append(append([]string{}, c...), "--store", store)...)
		// The same report, but for times and memory.
		last := func(s string) string { return strings.TrimRight(digits.ReplaceAllString(s, "N"), "\n") }
		if byFlag.code != byArg.code || byArg.code == exitUsage || last(byFlag.stdout) != last(byArg.stdout) {
			t.Errorf("%v: by argument %+v, by --store %+v; want the same", c, byArg, byFlag)
		}
		r := runCLI(t, nil, append(append([]string{}, c...), "--store", store, store)...)
		requireOneErrorLine(t, r, exitUsage, "not both")
		r = runCLI(t, nil, c...)
		requireOneErrorLine(t, r, exitUsage, "expects 1 argument, got 0 (the store, or give it with --store)")
		if !strings.Contains(r.stderr, "--help") {
			t.Errorf("%v with no store: %q does not point to --help", c, r.stderr)
		}
	}
}
