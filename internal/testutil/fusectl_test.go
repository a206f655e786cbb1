package testutil

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestAbortFUSE: after AbortFUSE the mount answers ENOTCONN and its
// server stops serving.
func TestAbortFUSE(t *testing.T) {
	RequireFUSE(t)
	dir, server := Mount(t, &fs.Inode{}, nil)
	if _, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	AbortFUSE(t, dir)
	if !Mounted(fusectlDir) {
		t.Fatalf("%s not mounted after AbortFUSE", fusectlDir)
	}
	wantAborted(t, dir, server)
}

// TestAbortFUSEMountedAt: the mount found by the mount table is aborted
// (ENOTCONN, its server stops); a directory that is no FUSE mount is
// left alone.
func TestAbortFUSEMountedAt(t *testing.T) {
	RequireFUSE(t)
	dir, server := Mount(t, &fs.Inode{}, nil)
	if err := mountFusectl(); err != nil {
		SkipOrFail(t, "cannot mount the FUSE control file system: %v", err)
	}
	if n, err := AbortFUSEMountedAt(t.TempDir()); n != 0 || err != nil {
		t.Fatalf("a plain directory: %d aborted, %v", n, err)
	}
	if n, err := AbortFUSEMountedAt(dir); n != 1 || err != nil {
		t.Fatalf("the mount: %d aborted, %v", n, err)
	}
	wantAborted(t, dir, server)
}

// wantAborted checks that the mount on dir answers ENOTCONN and that its
// server stops.
func wantAborted(t *testing.T, dir string, server *fuse.Server) {
	t.Helper()
	if _, err := os.ReadDir(dir); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("ReadDir of the aborted mount: %v, want ENOTCONN", err)
	}
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still serves 10 s after the abort")
	}
}
