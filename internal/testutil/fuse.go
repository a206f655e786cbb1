package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// EnvCI is the environment variable that marks a CI run. When it is
// "true", a test that needs FUSE fails instead of skipping: CI exists to
// run those tests, and a silently skipped mount test is a green lie.
const EnvCI = "CI"

// fuseDevice is the kernel's FUSE character device.
const fuseDevice = "/dev/fuse"

// skipFataler is the part of testing.TB that RequireFUSE decides with;
// it lets the decision be tested without failing the calling test.
type skipFataler interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// RequireFUSE skips t when FUSE mounts are not possible on this machine
// (no /dev/fuse, no permission, no fusermount3, or a probe mount fails),
// and fails t instead when the environment variable CI is "true".
//
// The probe really mounts an empty filesystem in a temporary directory
// and unmounts it, so a pass means mounting works, not just that a
// device node exists.
func RequireFUSE(t testing.TB) {
	t.Helper()
	requireFUSE(t, func() error { return probeFUSE(t.TempDir()) }, os.Getenv(EnvCI) == "true")
}

// requireFUSE skips or fails t when probe reports that FUSE is unusable.
func requireFUSE(t skipFataler, probe func() error, ci bool) {
	t.Helper()
	err := probe()
	if err == nil {
		return
	}
	if ci {
		t.Fatalf("FUSE is required when %s=true: %v", EnvCI, err)
		return
	}
	t.Skipf("skipping: FUSE is not usable here: %v", err)
}

// probeFUSE returns nil when an empty filesystem can be mounted on dir
// and unmounted again.
func probeFUSE(dir string) error {
	f, err := os.OpenFile(fuseDevice, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", fuseDevice, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", fuseDevice, err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			return fmt.Errorf("not root and no fusermount3 (Debian package fuse3): %w", err)
		}
	}
	opts := &fs.Options{MountOptions: fuse.MountOptions{FsName: "deltafs-probe", Name: "deltafs-probe"}}
	server, err := fs.Mount(dir, &fs.Inode{}, opts)
	if err != nil {
		return fmt.Errorf("probe mount on %s: %w", dir, err)
	}
	if err := server.Unmount(); err != nil {
		return fmt.Errorf("unmount probe mount %s: %w", dir, err)
	}
	return nil
}

// SkipOrFail skips t for the reason given, and fails it instead when the
// environment variable CI is "true": for a mount test that needs what CI
// has (root, FUSE passthrough, the FUSE control filesystem) and a
// developer's machine may not.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	skipOrFail(t, os.Getenv(EnvCI) == "true", format, args...)
}

func skipOrFail(t skipFataler, ci bool, format string, args ...any) {
	t.Helper()
	if ci {
		t.Fatalf("required when "+EnvCI+"=true: "+format, args...)
		return
	}
	t.Skipf(format, args...)
}
