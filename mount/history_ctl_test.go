package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// connect returns the Controller for path, closed at cleanup.
func connect(t *testing.T, path string, readOnly bool) Controller {
	t.Helper()
	c, closeFn, err := Connect(context.Background(), path, readOnly, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFn() })
	return c
}

func revNums(l FileLog) string {
	var b bytes.Buffer
	for _, r := range l.Revisions {
		fmt.Fprintf(&b, "%d:%s:%v ", r.Rev, r.Base, r.Snapshots)
	}
	return b.String()
}

// TestHistoryThroughTheMount drives log, cat and restore through a real
// mount's control socket, then the same on the unmounted store: the log
// includes a change closed just before the call, cat is binary-safe by
// revision and by snapshot, restore records a new revision whose second
// parent is the old one, and the errors keep their kinds across the
// socket.
func TestHistoryThroughTheMount(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 5))
	v0 := make([]byte, 3<<20) // larger than any socket buffer
	for i := range v0 {
		v0[i] = byte(r.UintN(256))
	}
	v1 := append(bytes.Clone(v0[:1000]), "an edit\x00\xff"...)
	mustDo(t, os.WriteFile(l.mnt+"/bin", v0, 0o644))
	mustDo(t, os.Mkdir(l.mnt+"/.snapshots/before", 0o755))
	mustDo(t, os.WriteFile(l.mnt+"/bin", v1, 0o644))
	c := connect(t, l.mnt, true)

	lg, err := c.Log(ctx, Target{Path: "bin"}) // the second write closed just now
	mustDo(t, err)
	n := len(lg.Revisions)
	if n != 2 || lg.Path != "bin" || lg.Revisions[0].Size != uint64(len(v0)) ||
		fmt.Sprint(lg.Revisions[0].Snapshots) != "[before]" || lg.Revisions[n-1].Size != uint64(len(v1)) ||
		len(lg.Revisions[n-1].Snapshots) != 0 {
		t.Fatalf("log: %s %+v", revNums(lg), lg)
	}
	for spec, want := range map[string][]byte{"rev 0": v0, "snapshot": v0, "newest": v1} {
		s := RevSpec{}
		switch spec {
		case "rev 0":
			s.Rev = new(uint32)
		case "snapshot":
			s.Snapshot = "before"
		}
		fr, data, err := CatBytes(ctx, c, Target{Path: "bin"}, s)
		if info := fr.Revision; err != nil || !bytes.Equal(data, want) || info.Size != uint64(len(want)) || string(fr.Path) != "bin" || fr.Deleted {
			t.Errorf("cat %s: %d bytes (%+v), %v", spec, len(data), info, err)
		}
	}
	fr, err := c.Restore(ctx, Target{Path: "/bin"}, new(uint32))
	mustDo(t, err)
	info := fr.Revision
	if int(info.Rev) != n || info.P2 == nil || info.P2.Rev != 0 || info.P1 == nil || int(info.P1.Rev) != n-1 || info.Base != "dedup" {
		t.Fatalf("restore: %+v", info)
	}
	if b, err := os.ReadFile(l.mnt + "/bin"); err != nil || !bytes.Equal(b, v0) {
		t.Fatalf("live file after restore: %d bytes, %v", len(b), err)
	}
	checkHistoryErrors(t, c, l.mnt)
	mounted, err := c.Stats(ctx)
	mustDo(t, err)
	l.stop(t)

	off := connect(t, store, false)
	lg2, err := off.Log(ctx, Target{Path: "bin"})
	if err != nil || revNums(lg2) != revNums(lg)+fmt.Sprintf("%d:dedup:[] ", n) {
		t.Fatalf("offline log %q, %v; mounted %q", revNums(lg2), err, revNums(lg))
	}
	fr, err = off.Restore(ctx, Target{Path: "bin"}, ptr(uint32(n-1)))
	info = fr.Revision
	if err != nil || int(info.Rev) != n+1 || int(info.P2.Rev) != n-1 {
		t.Fatalf("offline restore: %+v, %v", info, err)
	}
	if _, data, err := CatBytes(ctx, off, Target{Path: "bin"}, RevSpec{}); err != nil || !bytes.Equal(data, v1) {
		t.Fatalf("offline cat after restore: %d bytes, %v", len(data), err)
	}
	if b, _ := os.ReadFile(filepath.Join(store, liveDir, "bin")); !bytes.Equal(b, v1) {
		t.Fatalf("live file after the offline restore: %d bytes", len(b))
	}
	checkHistoryErrors(t, off, store)
	offStats, err := off.Stats(ctx)
	mustDo(t, err)
	if !mounted.Mounted || offStats.Mounted || offStats.Revisions != mounted.Revisions+1 {
		t.Errorf("stats: mounted %+v, offline %+v", mounted, offStats)
	}
}

// checkHistoryErrors checks the error kinds of bad history requests.
func checkHistoryErrors(t *testing.T, c Controller, root string) {
	t.Helper()
	ctx := context.Background()
	mustDo(t, os.MkdirAll(filepath.Join(root, "somedir"), 0o755))
	nine := uint32(9)
	for name, tc := range map[string]struct {
		path string
		spec RevSpec
		want error
	}{
		"dir":            {"somedir", RevSpec{}, ErrIsDir},
		"missing":        {"nosuch", RevSpec{}, index.ErrNotFound},
		"rev":            {"bin", RevSpec{Rev: &nine}, index.ErrNotFound},
		"snapshot":       {"bin", RevSpec{Snapshot: "nosuch"}, index.ErrNotFound},
		"in .snapshots":  {".snapshots/before/bin", RevSpec{}, ErrNoHistory},
		"above the root": {"../bin", RevSpec{}, ErrNoHistory},
	} {
		if _, _, err := CatBytes(ctx, c, Target{Path: tc.path}, tc.spec); !errors.Is(err, tc.want) {
			t.Errorf("cat %s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := c.Log(ctx, Target{Path: "somedir"}); !errors.Is(err, ErrIsDir) {
		t.Errorf("log of a directory: %v", err)
	}
	if _, err := c.Restore(ctx, Target{Path: "bin"}, ptr(uint32(9))); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("restore of a missing revision: %v", err)
	}
	if _, err := c.Restore(ctx, Target{Path: "../../etc/evil"}, ptr(uint32(0))); !errors.Is(err, ErrNoHistory) {
		t.Errorf("restore to a path above the root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc")); !os.IsNotExist(err) {
		t.Errorf("a restore above the root made etc in the tree: %v", err)
	}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// TestRestoreByIDToAnotherPathRefused: restore --id N PATH of a live
// file N that lives at another path than PATH is refused, mounted and
// offline, and changes neither file: it restored N in place, exit 0,
// whatever PATH said (a user review; PATH with --id is where a deleted
// file is made again).
func TestRestoreByIDToAnotherPathRefused(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	ctx := context.Background()
	mustDo(t, os.WriteFile(l.mnt+"/a", []byte("A0\n"), 0o644))
	mustDo(t, os.WriteFile(l.mnt+"/b", []byte("B0\n"), 0o644))
	l.recorded(t, 2)
	mustDo(t, os.WriteFile(l.mnt+"/a", []byte("A1\n"), 0o644))
	l.recorded(t, 3)
	mustDo(t, os.Link(l.mnt+"/a", l.mnt+"/a-link"))
	c := connect(t, l.mnt, false)
	lg, err := c.Log(ctx, Target{Path: "a"})
	mustDo(t, err)
	check := func(c Controller, dir string) {
		t.Helper()
		a, err := os.ReadFile(filepath.Join(dir, "a"))
		mustDo(t, err)
		for _, to := range []string{"b", "copy.txt", "../escape.txt"} {
			if _, err := c.Restore(ctx, Target{Path: to, File: lg.File}, new(uint32)); err == nil {
				t.Errorf("restore --id %d %s: no error", lg.File, to)
			}
		}
		for name, want := range map[string]string{"a": string(a), "b": "B0\n"} {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
				t.Errorf("%s after the refused restores: %q, %v", name, b, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "copy.txt")); err == nil {
			t.Error("copy.txt was made")
		}
		for _, name := range []string{"a", "a-link"} { // a hard link of a names it too
			if _, err := c.Restore(ctx, Target{Path: name, File: lg.File}, new(uint32)); err != nil {
				t.Errorf("restore --id %d %s: %v", lg.File, name, err)
			}
		}
	}
	check(c, l.mnt)
	l.stop(t)
	check(connect(t, store, false), filepath.Join(store, liveDir))
}

// TestRestoreKeepsHoles: a restored revision of a sparse file is sparse
// again, mounted, offline and for a deleted file: every byte was written,
// and a disk image took its full size (a user review).
func TestRestoreKeepsHoles(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	ctx := context.Background()
	const size = 8 << 20
	img := l.mnt + "/disk.img"
	f, err := os.Create(img)
	mustDo(t, err)
	mustDo(t, f.Truncate(size))
	_, err = f.WriteAt([]byte("head"), 0)
	mustDo(t, err)
	_, err = f.WriteAt([]byte("middle"), size/2+100)
	mustDo(t, err)
	_, err = f.WriteAt([]byte("tail"), size-4)
	mustDo(t, err)
	mustDo(t, f.Close())
	want, err := os.ReadFile(img)
	mustDo(t, err)
	l.recorded(t, 1)
	mustDo(t, os.WriteFile(img, []byte("not sparse\n"), 0o644))
	l.recorded(t, 2)
	sparse := func(p, how string) {
		t.Helper()
		got, err := os.ReadFile(p)
		var st syscall.Stat_t
		if err == nil {
			err = syscall.Stat(p, &st)
		}
		if err != nil || !bytes.Equal(got, want) || st.Blocks*512 > 1<<20 {
			t.Errorf("%s restore: %d bytes (equal %v), %d bytes allocated, %v", how, len(got), bytes.Equal(got, want), st.Blocks*512, err)
		}
	}
	c := connect(t, l.mnt, false)
	_, err = c.Restore(ctx, Target{Path: "disk.img"}, new(uint32))
	mustDo(t, err)
	sparse(img, "mounted")
	if _, data, err := CatBytes(ctx, c, Target{Path: "disk.img"}, RevSpec{}); err != nil || !bytes.Equal(data, want) {
		t.Errorf("the restore's revision: %d bytes (equal %v), %v", len(data), bytes.Equal(data, want), err)
	}
	mustDo(t, os.Remove(img))
	mustDo(t, l.rec.Sync(ctx))
	_, err = c.Restore(ctx, Target{Path: "disk.img"}, new(uint32))
	mustDo(t, err)
	sparse(img, "mounted, deleted")
	mustDo(t, os.WriteFile(img, []byte("not sparse\n"), 0o644))
	l.stop(t)
	off := connect(t, store, false)
	_, err = off.Restore(ctx, Target{Path: "disk.img"}, new(uint32))
	mustDo(t, err)
	live := filepath.Join(store, liveDir, "disk.img")
	sparse(live, "offline")
	mustDo(t, os.Remove(live))
	_, err = off.Restore(ctx, Target{Path: "disk.img"}, new(uint32))
	mustDo(t, err)
	sparse(live, "offline, deleted")
}

// TestWriteSparse: writeSparse writes back exactly the bytes it is given,
// whatever blocks of them are zeros, ending in a hole or in a partial
// block, within one read of its source or across several.
func TestWriteSparse(t *testing.T) {
	nonzero := func(n int) []byte { return bytes.Repeat([]byte{7}, n) }
	zeros := func(n int) []byte { return make([]byte, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for i, data := range [][]byte{
		nil, nonzero(1), zeros(1), zeros(sparseBlock), nonzero(sparseBlock - 1),
		cat(zeros(sparseBlock), nonzero(1)), cat(nonzero(sparseBlock+1), zeros(2*sparseBlock)),
		cat(nonzero(10), zeros(3*sparseBlock), nonzero(sparseBlock+5), zeros(sparseBlock), nonzero(1)),
		// across the reads of sparseBuf bytes
		nonzero(sparseBuf + 10), cat(zeros(sparseBuf), nonzero(5)), cat(nonzero(sparseBuf-3), zeros(sparseBuf+3)),
		cat(nonzero(3), zeros(sparseBuf-3+sparseBlock), nonzero(2*sparseBlock), zeros(sparseBuf)),
	} {
		p := filepath.Join(t.TempDir(), "f")
		f, err := os.Create(p)
		mustDo(t, err)
		mustDo(t, writeSparse(f, bytes.NewReader(data), int64(len(data))))
		mustDo(t, f.Close())
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Errorf("case %d: %d bytes back for %d, %v", i, len(got), len(data), err)
		}
	}
}
