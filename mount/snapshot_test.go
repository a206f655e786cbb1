package mount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil/storetest"
)

// newOfflineStore creates a store whose live directory holds a few files
// that no revision records yet (as after a crash, or before any mount).
func newOfflineStore(t *testing.T) string {
	return storetest.NewOffline(t, map[string]string{"a.txt": "alpha", "sub/b.txt": "beta", "empty": ""})
}

func openOffline(t *testing.T, dir string, ro bool) *Offline {
	t.Helper()
	o, err := OpenOffline(dir, ro, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// readSnap reads the file at rel in snapshot name through the store.
func readSnap(t *testing.T, o *Offline, name, rel string) string {
	t.Helper()
	ctx := context.Background()
	s, err := o.snap.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Root.Tree
	dir, file := filepath.Split(rel)
	if dir != "" {
		tr, err := o.snap.Tree(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := tr.Lookup(filepath.Clean(dir))
		h = e.Tree
	}
	tr, err := o.snap.Tree(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := tr.Lookup(file)
	if !ok {
		t.Fatalf("%s: %s missing", name, rel)
	}
	if e.Rev.IsNull() {
		return ""
	}
	b, err := o.snap.Read(ctx, e.Rev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOfflineSnapshots(t *testing.T) {
	dir := newOfflineStore(t)
	ctx := context.Background()
	o := openOffline(t, dir, false)
	c := o.Controller()
	if _, err := c.CreateSnapshot(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	st1, _ := c.Stats(ctx)
	if st1.Revisions != 2 || st1.Snapshots != 1 || st1.Files != 2 {
		t.Fatalf("after the first snapshot: %+v (want 2 revisions: the empty file needs none)", st1)
	}
	if _, err := c.CreateSnapshot(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	if st2, _ := c.Stats(ctx); st2.Revisions != 2 {
		t.Fatalf("an unchanged tree recorded revisions: %+v", st2)
	}
	if err := os.WriteFile(filepath.Join(dir, liveDir, "a.txt"), []byte("alpha, edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Close()
	o = openOffline(t, dir, false) // a new builder walks the whole tree
	c = o.Controller()
	if _, err := c.CreateSnapshot(ctx, "third"); err != nil {
		t.Fatal(err)
	}
	for snap, want := range map[string]string{"first": "alpha", "second": "alpha", "third": "alpha, edited"} {
		if got := readSnap(t, o, snap, "a.txt"); got != want {
			t.Errorf("%s/a.txt = %q, want %q", snap, got, want)
		}
	}
	if got := readSnap(t, o, "third", "sub/b.txt"); got != "beta" {
		t.Errorf("third/sub/b.txt = %q", got)
	}
	if _, err := c.CreateSnapshot(ctx, "third"); !errors.Is(err, index.ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := c.RenameSnapshot(ctx, "first", "premier"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshot(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	list, _ := c.ListSnapshots(ctx)
	if fmt.Sprint(names(list)) != "[premier third]" {
		t.Fatalf("list %v", names(list))
	}
	o.Close()
	ro := openOffline(t, dir, true)
	if _, err := ro.Controller().CreateSnapshot(ctx, "x"); err == nil {
		t.Fatal("snapshot on a read-only open succeeded")
	}
}

func names(l []index.Snapshot) []string {
	var out []string
	for _, s := range l {
		out = append(out, s.Name)
	}
	return out
}

func TestAutoSnapshotsRetireOnlyTheirOwn(t *testing.T) {
	dir := newOfflineStore(t)
	ctx := context.Background()
	o := openOffline(t, dir, false)
	c := o.Controller()
	if _, err := c.CreateSnapshot(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 30, 2, 15, 0, 0, time.UTC)
	a := &autoSnapshots{s: o.snap, keep: 3, log: quiet(), now: func() time.Time { clock = clock.Add(time.Minute); return clock }, nameFunc: AutoName}
	for range 5 {
		a.tick(ctx)
	}
	list, _ := c.ListSnapshots(ctx)
	want := "[mine auto-2026-11-30T02:18:00Z auto-2026-11-30T02:19:00Z auto-2026-11-30T02:20:00Z]"
	if fmt.Sprint(names(list)) != want {
		t.Fatalf("after 5 ticks keeping 3: %v, want %s", names(list), want)
	}
	if !isAuto("auto-2026-11-30T02:18:00Z") || isAuto("auto-tuesday") || isAuto("mine") {
		t.Fatal("isAuto misjudges names")
	}
	// Their names are theirs: a user can neither take nor rename a
	// snapshot to one, but can rename one of theirs away to keep it.
	if _, err := c.CreateSnapshot(ctx, "auto-2026-12-01T00:00:00Z"); !errors.Is(err, index.ErrBadName) {
		t.Fatalf("create with an automatic name: %v, want ErrBadName", err)
	}
	if err := c.RenameSnapshot(ctx, "mine", "auto-2026-12-01T00:00:00Z"); !errors.Is(err, index.ErrBadName) {
		t.Fatalf("rename to an automatic name: %v, want ErrBadName", err)
	}
	if _, err := c.CreateSnapshot(ctx, "auto-tuesday"); err != nil {
		t.Fatalf("a name only starting like an automatic one: %v", err)
	}
	if err := c.RenameSnapshot(ctx, "auto-2026-11-30T02:18:00Z", "kept"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a.tick(ctx)
	}
	list, _ = c.ListSnapshots(ctx)
	want = "[mine kept auto-tuesday auto-2026-11-30T02:21:00Z auto-2026-11-30T02:22:00Z auto-2026-11-30T02:23:00Z]"
	if fmt.Sprint(names(list)) != want {
		t.Fatalf("after a rename and 3 more ticks: %v, want %s", names(list), want)
	}
}

// TestSnapshotListCache: warm (a mount runs it at start) caches the
// list, so that names are checked and listed without the index; a
// snapshot created while a listing was already cached appears once, and
// the cache follows deletes and renames.
func TestSnapshotListCache(t *testing.T) {
	ctx := context.Background()
	dir := newOfflineStore(t)
	o := openOffline(t, dir, false)
	for _, n := range []string{"a", "b"} {
		if _, err := o.snap.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	o.snap.warm(ctx)
	o.snap.mu.Lock()
	valid, cached := o.snap.valid, names(o.snap.cached)
	o.snap.mu.Unlock()
	if !valid || strings.Join(cached, ",") != "a,b" {
		t.Fatalf("after warm: valid %v, cached %v", valid, cached)
	}
	c, err := o.snap.Create(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	o.snap.added(c) // as when a listing ran between the store's commit and the cache edit
	mustDo(t, o.snap.Delete(ctx, "a"))
	mustDo(t, o.snap.Rename(ctx, "b", "b2"))
	if _, err := o.snap.Create(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	l, err := o.snap.List(ctx)
	mustDo(t, err)
	stored, err := o.st.SnapshotList(ctx)
	mustDo(t, err)
	if got, want := strings.Join(names(l), ","), strings.Join(names(stored), ","); got != want || got != "b2,c,d" {
		t.Fatalf("cached list %q, store %q, want b2,c,d", got, want)
	}
}
