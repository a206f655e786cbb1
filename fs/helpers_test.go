package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/internal/testutil"
)

// events is a Recorder that keeps what it is told.
type events struct {
	mu      sync.Mutex
	changes []fs.Change
	renames []fs.Rename
	removes []fs.Remove
	links   []fs.Link
	waits   []fs.FileID // Wait calls (fsync)
	// log lists Dirtied, Changed and Undirtied calls in order
	// ("dirtied", "changed", "undirtied").
	log []string
	// onDirtied, if set, sees every Dirtied call, with mu held.
	onDirtied func(fs.FileID, string)
	// check, if set, sees every change before its Content is closed.
	check func(fs.Change)
}

func (e *events) Changed(c fs.Change) {
	e.mu.Lock()
	check := e.check
	e.mu.Unlock()
	if check != nil {
		check(c)
	}
	c.Close()
	c.Content, c.Report = nil, 0 // tests compare the rest
	e.mu.Lock()
	e.changes = append(e.changes, c)
	e.log = append(e.log, "changed")
	e.mu.Unlock()
}
func (e *events) Dirtied(id fs.FileID, path string) {
	e.mu.Lock()
	e.log = append(e.log, "dirtied")
	if e.onDirtied != nil {
		e.onDirtied(id, path) // with e.mu held
	}
	e.mu.Unlock()
}
func (e *events) Undirtied(fs.FileID) {
	e.mu.Lock()
	e.log = append(e.log, "undirtied")
	e.mu.Unlock()
}
func (e *events) Renamed(r fs.Rename)        { e.mu.Lock(); e.renames = append(e.renames, r); e.mu.Unlock() }
func (e *events) Removed(r fs.Remove)        { e.mu.Lock(); e.removes = append(e.removes, r); e.mu.Unlock() }
func (e *events) Linked(l fs.Link)           { e.mu.Lock(); e.links = append(e.links, l); e.mu.Unlock() }
func (e *events) Sync(context.Context) error { return nil }
func (e *events) Wait(_ context.Context, id fs.FileID) error {
	e.mu.Lock()
	e.waits = append(e.waits, id)
	e.mu.Unlock()
	return nil
}

// setCheck installs a check of every change.
func (e *events) setCheck(f func(fs.Change)) {
	e.mu.Lock()
	e.check = f
	e.mu.Unlock()
}

// takeLog returns the Dirtied/Changed order so far and forgets it.
func (e *events) takeLog() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.log
	e.log = nil
	return l
}

// takeChanges returns the changes reported so far and forgets them.
func (e *events) takeChanges() []fs.Change {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := slices.Clone(e.changes)
	e.changes = nil
	return c
}

// mounted is a live tree mounted for a test.
type mounted struct {
	mnt, live string
	rec       *events
	fsys      *fs.FS
}

// mountLive mounts a live tree over a fresh directory.
func mountLive(t testing.TB) *mounted {
	t.Helper()
	testutil.RequireFUSE(t)
	live := filepath.Join(t.TempDir(), "live")
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := &events{}
	f, err := fs.New(fs.Config{LiveDir: live, Recorder: rec, Passthrough: os.Getenv("NOPT") == ""})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // runs after the unmount registered below
	mnt, _ := testutil.Mount(t, f.Root(), fs.Options(false))
	return &mounted{mnt: mnt, live: live, rec: rec, fsys: f}
}

// mountPassthrough is mountLive for a test of passthrough handles: it
// skips when passthrough is off (NOPT set) or the kernel will not grant
// it (not root), and fails instead under CI=true, which runs as root.
func mountPassthrough(t testing.TB) *mounted {
	t.Helper()
	if os.Getenv("NOPT") != "" || os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "passthrough tests need root and NOPT unset")
	}
	return mountLive(t)
}

// path returns the mount path of name.
func (m *mounted) path(name string) string { return filepath.Join(m.mnt, name) }

// awaitReleased waits until every handle of the live file at rel is
// released (the kernel sends RELEASE after close(2) returns), and then
// past the I/O mode's grace (ioModeGrace), so that the next open's mode
// does not depend on the earlier handles'.
func (m *mounted) awaitReleased(t testing.TB, rel string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); m.fsys.OpenHandles(rel) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d handles still open", rel, m.fsys.OpenHandles(rel))
		}
	}
	time.Sleep(50 * time.Millisecond)
}
