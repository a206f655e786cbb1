package mount

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// TestSnapshotAfterInPlaceWrite is the reviewer's repro, smaller: a
// snapshot right after a 4 KiB in-place write into a big file, recorded
// from its written ranges, costs about the write: it reads neither the
// live file nor the revision's text whole (it hashed the live file and
// rebuilt the revision's 1 GiB text to compare them, and the mount kept
// the memory), and the snapshot holds the file exactly.
func TestSnapshotAfterInPlaceWrite(t *testing.T) {
	const size, write = 64 << 20, 4096
	store := filepath.Join(t.TempDir(), "s.dfs")
	var revs *liveRevs
	l := startWith(t, Config{Store: store, testRevisions: func(r *liveRevs) fs.Revisions { revs = r; return r }})
	p := filepath.Join(l.mnt, "vm.img")
	want := testutil.Bytes(1, size)
	mustDo(t, os.WriteFile(p, want, 0o644))
	l.recorded(t, 1)
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "k0"), 0o755))
	sink := l.sink(t)
	for k := 1; k <= 3; k++ {
		b := testutil.Bytes(uint64(10+k), write)
		off := int64(k) * (size / 4)
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		mustDo(t, err)
		writeAtT(t, f, off, b)
		mustDo(t, f.Close())
		copy(want[off:], b)
		l.recorded(t, uint64(1+k))
		read0, st0 := revs.read.Load(), storeStats(t, sink.st)
		name := "k" + string(rune('0'+k))
		mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", name), 0o755))
		st1 := storeStats(t, sink.st)
		read, stored, hashed := revs.read.Load()-read0, st1.BytesRead-st0.BytesRead, st1.HashedBytes-st0.HashedBytes
		t.Logf("snapshot %s: %d bytes read from the live file, %d from the store, %d hashed", name, read, stored, hashed)
		if read > 1<<20 || stored > 1<<20 || hashed > 1<<20 {
			t.Errorf("snapshot %s after a %d-byte write into a %d-byte file read %d live bytes and %d stored, hashed %d; want about the write",
				name, write, size, read, stored, hashed)
		}
		got, err := os.ReadFile(filepath.Join(l.mnt, ".snapshots", name, "vm.img"))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("snapshot %s: vm.img differs from what was written (%v)", name, err)
		}
	}
	// A change of its metadata after the write moves the ctime past the
	// revision's time: the stat no longer vouches for the content, which
	// is read and compared (the revision's text rebuilt), and holds.
	mustDo(t, os.Chmod(p, 0o600))
	read0 := revs.read.Load()
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "chmod"), 0o755))
	if read := revs.read.Load() - read0; read != size {
		t.Errorf("snapshot after a chmod read %d bytes of the live file, want it whole (%d)", read, size)
	}
	got, err := os.ReadFile(filepath.Join(l.mnt, ".snapshots", "chmod", "vm.img"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("snapshot chmod: vm.img differs from what was written (%v)", err)
	}
	l.stop(t)
	verifyClean(t, store)
}
