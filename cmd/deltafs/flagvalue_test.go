package main

import (
	"strings"
	"testing"
)

// TestFlagValueErrors: a flag value Go's parsers refuse is a usage error
// that says why in words, not in strconv's or time's.
func TestFlagValueErrors(t *testing.T) {
	store := newCLIStore(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cat", "--store", store, "a.txt", "--rev", "99999999999999999999"}, `deltafs: cat: invalid argument "99999999999999999999" for "--rev" flag: out of range (see`},
		{[]string{"cat", "--store", store, "a.txt", "--rev", "x"}, `"--rev" flag: not a whole number (see`},
		{[]string{"restore", "--store", store, "a.txt", "--rev", "99999999999999999999"}, `"--rev" flag: out of range (see`},
		{[]string{"log", "--store", store, "--id", "99999999999999999999"}, `"--id" flag: out of range (see`},
		{[]string{"log", "--store", store, "--id", "-1"}, `"--id" flag: must not be negative (see`},
		{[]string{"repack", "--max-read-ratio", "x", store}, `"--max-read-ratio" flag: not a number (see`},
		{[]string{"repack", "--max-read-ratio", "nan", store}, `--max-read-ratio must be positive`},
		{[]string{"repack", "--max-read-ratio", "+Inf", store}, `--max-read-ratio must be positive`},
		{[]string{"log", "--store", store, "a.txt", "--json=maybe"}, `"--json" flag: want true or false (see`},
		{[]string{"mount", "--fsync-interval", "1x", store, t.TempDir()}, `"--fsync-interval" flag: not a duration`},
	} {
		t.Run(strings.Join(tt.args[:2], " "), func(t *testing.T) {
			r := runBinary(t, nil, tt.args...)
			requireOneErrorLine(t, r, exitUsage, tt.want)
			if strings.Contains(r.stderr, "strconv") || strings.Contains(r.stderr, "parsing") || strings.Contains(r.stderr, "time:") {
				t.Errorf("Go's parser in the message: %q", r.stderr)
			}
		})
	}
}
