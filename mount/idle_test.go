package mount

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestIdleMountDropsCaches: once the store has gone unused for the idle
// period, the mount drops the store's text caches (and returns free heap
// to the OS); it does it once per idle period, and again only after the
// store was used again.
func TestIdleMountDropsCaches(t *testing.T) {
	trims := make(chan int64, 16)
	const idle = 300 * time.Millisecond
	l := startWith(t, Config{Store: filepath.Join(t.TempDir(), "store"), testIdle: idle,
		testTrimmed: func(d int64) { trims <- d }})
	p := filepath.Join(l.mnt, "notes.txt")
	for i, s := range []string{"first text\n", "second text\n", "third text\n"} {
		mustDo(t, os.WriteFile(p, []byte(s), 0o644))
		l.recorded(t, uint64(i+1))
	}
	readOldest := func() {
		t.Helper()
		ents, err := os.ReadDir(filepath.Join(l.mnt, ".history", "notes.txt"))
		mustDo(t, err)
		if len(ents) != 3 {
			t.Fatalf(".history/notes.txt lists %d revisions, want 3", len(ents))
		}
		b, err := os.ReadFile(filepath.Join(l.mnt, ".history", "notes.txt", ents[0].Name()))
		mustDo(t, err)
		if string(b) != "first text\n" {
			t.Fatalf("oldest revision reads %q", b)
		}
	}
	readOldest()
	wait := func() int64 {
		t.Helper()
		select {
		case d := <-trims:
			return d
		case <-time.After(20 * idle):
			t.Fatalf("no idle trim within %s of the last use", 20*idle)
		}
		return 0
	}
	if d := wait(); d <= 0 {
		t.Fatalf("idle trim dropped %d bytes; the latest text and the revision read were cached", d)
	}
	select {
	case d := <-trims:
		t.Fatalf("a second trim (%d bytes) with the store unused", d)
	case <-time.After(4 * idle):
	}
	// Used again: a new revision (its text is kept as the file's latest).
	mustDo(t, os.WriteFile(p, []byte("fourth text\n"), 0o644))
	l.recorded(t, 4)
	if d := wait(); d <= 0 {
		t.Fatalf("trim after a put dropped %d bytes", d)
	}
}
