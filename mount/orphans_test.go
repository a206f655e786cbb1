package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestUnreleasedHandleRecordedAtShutdown: a writable handle the kernel
// never releases (here the connection is aborted under it, as an unmount
// aborts it with a RELEASE still queued) is recorded when the mount shuts
// down.
func TestUnreleasedHandleRecordedAtShutdown(t *testing.T) {
	store := filepath.Join(t.TempDir(), "s.dfs")
	l := start(t, store)
	data := testutil.Bytes(3, 100_000)
	f, err := os.Create(filepath.Join(l.mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	writeAtT(t, f, 0, data)
	var st unix.Stat_t
	if err := unix.Stat(l.mnt, &st); err != nil {
		t.Fatal(err)
	}
	abort := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", unix.Minor(st.Dev))
	if err := os.WriteFile(abort, []byte("1"), 0o200); err != nil {
		t.Skipf("cannot abort the FUSE connection: %v", err)
	}
	select {
	case err := <-l.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mount did not shut down after its connection was aborted")
	}
	l.cancel()
	l.cancel = nil
	f.Close() // the connection is gone
	if err := unix.Unmount(l.mnt, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	st2, revs := revisions(t, store)
	if len(revs[1]) != 1 {
		t.Fatalf("%d revisions of the unreleased file, want 1", len(revs[1]))
	}
	if got, err := st2.Get(context.Background(), revs[1][0].ID()); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("its revision reads back %d bytes (%v), want the written %d", len(got), err, len(data))
	}
}
