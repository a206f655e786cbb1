package testutil

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder is a skipFataler that records what requireFUSE decided.
type recorder struct {
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func TestRequireFUSEDecision(t *testing.T) {
	unusable := func() error { return errors.New("no /dev/fuse") }
	usable := func() error { return nil }
	tests := []struct {
		name          string
		probe         func() error
		ci            bool
		skip, failure bool
	}{
		{"usable, laptop", usable, false, false, false},
		{"usable, CI", usable, true, false, false},
		{"unusable, laptop skips", unusable, false, true, false},
		{"unusable, CI fails", unusable, true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			requireFUSE(&r, tt.probe, tt.ci)
			if r.skipped != tt.skip || r.failed != tt.failure {
				t.Fatalf("skipped=%v failed=%v (%q), want skipped=%v failed=%v",
					r.skipped, r.failed, r.msg, tt.skip, tt.failure)
			}
		})
	}
}

func TestProbeFUSEMissingDir(t *testing.T) {
	RequireFUSE(t) // the machine can mount; now a bad mount point must be reported
	if err := probeFUSE(t.TempDir() + "/does-not-exist"); err == nil {
		t.Fatal("probe mount on a missing directory succeeded")
	}
}

func TestRequireFUSEMountsHere(t *testing.T) {
	RequireFUSE(t)
	// RequireFUSE returned, so a probe mount worked; a second one must too
	// (the first unmounted cleanly and left nothing behind).
	if err := probeFUSE(t.TempDir()); err != nil {
		t.Fatalf("second probe mount: %v", err)
	}
}

func TestSkipOrFailDecision(t *testing.T) {
	for _, ci := range []bool{false, true} {
		var r recorder
		skipOrFail(&r, ci, "needs %s", "root")
		if r.skipped == ci || r.failed != ci || !strings.Contains(r.msg, "needs root") {
			t.Fatalf("ci=%v: skipped=%v failed=%v (%q)", ci, r.skipped, r.failed, r.msg)
		}
	}
}
