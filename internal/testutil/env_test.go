package testutil

import (
	"fmt"
	"testing"
)

// fatalTB records Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }

func TestEnvNumber(t *testing.T) {
	const name = "DELTAFS_TESTUTIL_ENV_NUMBER"
	t.Setenv(name, "")
	if got := EnvNumber(t, name, 12); got != 12 {
		t.Errorf("unset: %d, want the default 12", got)
	}
	t.Setenv(name, "40")
	if got := EnvNumber(t, name, 12); got != 40 {
		t.Errorf("40: got %d", got)
	}
	t.Setenv(name, "18446744073709551615")
	if got := EnvNumber(t, name, uint64(1)); got != 1<<64-1 {
		t.Errorf("a 64-bit seed: got %d", got)
	}
	for _, bad := range []string{"-1", "ten", "4x"} {
		t.Setenv(name, bad)
		f := &fatalTB{TB: t}
		EnvNumber(f, name, 12)
		if f.fatal == "" {
			t.Errorf("%q: no failure", bad)
		}
	}
}
