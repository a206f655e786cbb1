package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/internal/testutil/crashfs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestPassthroughOnFUSELiveDir: a live directory on another FUSE file
// system (crashfs, as the mount package's power-cut test has it). The
// kernel may refuse a FUSE file as a passthrough backing file (a stack
// too deep); go-fuse then stops asking and the opens are served through
// the server. Either way, reads of read-only opens and the writes of a
// Create's writer (passthrough when taken) reach the live file.
func TestPassthroughOnFUSELiveDir(t *testing.T) {
	testutil.RequireFUSE(t)
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "passthrough needs root")
	}
	cfs := crashfs.MountT(t, crashfs.Options{})
	live := filepath.Join(cfs.Dir(), "live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	data := testutil.Bytes(7, 1<<20)
	if err := os.WriteFile(filepath.Join(live, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{LiveDir: live, Passthrough: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mnt, server := testutil.Mount(t, f.Root(), Options(false))
	if server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		testutil.SkipOrFail(t, "kernel without FUSE passthrough")
	}
	got, err := os.ReadFile(filepath.Join(mnt, "big"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	// A Create's writer is a passthrough writer when the kernel takes it.
	w, err := os.Create(filepath.Join(mnt, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[:5000]); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(live, "new")); err != nil || !bytes.Equal(got, data[:5000]) {
		t.Fatalf("live file after a Create's writes: %d bytes, %v", len(got), err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "new")); err != nil || !bytes.Equal(got, data[:5000]) {
		t.Fatalf("read back through the mount: %d bytes, %v", len(got), err)
	}
	t.Logf("reads served by the server for handles meant for passthrough: %d (0: the kernel took FUSE files as backing files)", f.serverReads.Load())
}
