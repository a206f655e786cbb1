package mount

import (
	"strings"
	"testing"
)

// TestShutdownNamesItsOwnRestore: the mount's own process among the
// holders its shutdown waits for is named as the restore it runs, or
// left out with no file open there.
func TestShutdownNamesItsOwnRestore(t *testing.T) {
	vim := Holder{PID: 4242, Name: "vim", Files: 1}
	for _, c := range []struct {
		hs   []Holder
		want string
	}{
		{[]Holder{{PID: 7, Name: "deltafs", Files: 1}, vim}, "a deltafs restore (pid 7), vim (pid 4242)"},
		{[]Holder{{PID: 7, Name: "deltafs"}, vim}, "vim (pid 4242)"},
		{[]Holder{vim}, "vim (pid 4242)"},
	} {
		got := DescribeHolders(WithoutSelf(c.hs, 7))
		if got != c.want || strings.Contains(got, "deltafs (pid") {
			t.Errorf("%v: %q, want %q", c.hs, got, c.want)
		}
	}
}
