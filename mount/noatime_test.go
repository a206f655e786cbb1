package mount

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSnapshotLeavesAtimes: the mount's own reads of live files (a
// snapshot hashing a file whose ctime moved, or a hard-linked one) leave
// their atimes alone: under relatime they moved to the snapshot's time,
// in the live tree and in the snapshot (a user review).
func TestSnapshotLeavesAtimes(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{"f", "a"} {
		mustDo(t, os.WriteFile(filepath.Join(l.mnt, name), []byte(name+" content\n"), 0o644))
	}
	mustDo(t, os.Link(filepath.Join(l.mnt, "a"), filepath.Join(l.mnt, "b")))
	l.recorded(t, 2)
	for _, name := range []string{"f", "a"} {
		p := filepath.Join(l.mnt, name)
		mustDo(t, os.Chmod(p, 0o600)) // the snapshot reads a file whose ctime moved
		ts := []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), {Nsec: unix.UTIME_OMIT}}
		mustDo(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0))
	}
	mustDo(t, os.Mkdir(filepath.Join(l.mnt, ".snapshots", "s"), 0o755))
	for _, p := range []string{
		filepath.Join(store, liveDir, "f"), filepath.Join(store, liveDir, "a"),
		filepath.Join(l.mnt, ".snapshots", "s", "f"), filepath.Join(l.mnt, ".snapshots", "s", "b"),
	} {
		var st unix.Stat_t
		mustDo(t, unix.Lstat(p, &st))
		if at := time.Unix(st.Atim.Unix()); !at.Equal(old) {
			t.Errorf("%s: atime %v, want %v", p, at.UTC(), old)
		}
	}
}
