package testutil

import (
	"os"
	"strconv"
	"testing"
)

// EnvNumber returns the whole number the environment variable name
// holds (a test's knob: rounds, a seed), or def when it is unset; any
// other value fails t.
func EnvNumber[T ~int | ~uint64](t testing.TB, name string, def T) T {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a whole number: %v", name, s, err)
	}
	return T(n)
}
