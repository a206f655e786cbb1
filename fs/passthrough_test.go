package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestReadOnlyOpensUsePassthrough checks that reads of a read-only open
// never reach the server when the kernel offers passthrough.
func TestReadOnlyOpensUsePassthrough(t *testing.T) {
	testutil.RequireFUSE(t)
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "passthrough needs root")
	}
	live := t.TempDir()
	data := testutil.Bytes(7, 4<<20)
	if err := os.WriteFile(filepath.Join(live, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{LiveDir: live, Passthrough: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // after the unmount, which Mount registers later
	mnt, server := testutil.Mount(t, f.Root(), Options(false))
	if server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		testutil.SkipOrFail(t, "kernel without FUSE passthrough")
	}
	got, err := os.ReadFile(filepath.Join(mnt, "big"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if n := f.serverReads.Load(); n != 0 {
		t.Fatalf("%d reads went through the server; passthrough is not in use", n)
	}
}
