package mount

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/objstore"
)

// TestRestoreOfInPlaceRevisionIsADedup: a big revision an in-place write
// made (stored from its written ranges, its hash deferred) restored
// through the mount and offline is recorded as a dedup of it, not put
// whole again (which rebuilt it in memory to compare: the mount peaked
// at 666 MiB and an offline restore at 472 MiB for a 200 MiB file, 71
// MiB each now, bench/scripts/restore_inplace_rss.sh); every revision reads
// back exact and the store verifies, the deferred hash now filled in.
func TestRestoreOfInPlaceRevisionIsADedup(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	ctx := context.Background()
	v0 := bigText(textSpillMin + 3<<20 + 7)
	p := filepath.Join(l.mnt, "big")
	mustDo(t, os.WriteFile(p, v0, 0o644))
	l.recorded(t, 1)
	want := [][]byte{v0}
	for i, off := range []int{1 << 20, 9 << 20} {
		v := bytes.Clone(want[len(want)-1])
		copy(v[off:off+4096], bytes.Repeat([]byte{'0' + byte(i)}, 4096))
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		mustDo(t, err)
		_, err = f.WriteAt(v[off:off+4096], int64(off))
		mustDo(t, errors.Join(err, f.Close()))
		l.recorded(t, uint64(2+i))
		want = append(want, v)
	}
	c := connect(t, l.mnt, false)
	restore := func(c Controller, rev uint32, live string) {
		t.Helper()
		r, err := c.Restore(ctx, Target{Path: "big"}, ptr(rev))
		mustDo(t, err)
		if r.Revision.Base != "dedup" || r.Revision.BaseRev == nil || r.Revision.BaseRev.Rev != rev {
			t.Errorf("restore --rev %d: revision %d is %q of %v, want a dedup of %d", rev, r.Revision.Rev, r.Revision.Base, r.Revision.BaseRev, rev)
		}
		if got, err := os.ReadFile(live); err != nil || !bytes.Equal(got, want[rev]) {
			t.Fatalf("restore --rev %d: the live file has %d bytes, equal %v, %v", rev, len(got), bytes.Equal(got, want[rev]), err)
		}
		want = append(want, want[rev])
	}
	if r, err := c.Log(ctx, Target{Path: "big"}); err != nil || len(r.Revisions) != 3 || r.Revisions[1].Base != "p1" {
		t.Fatalf("log before the restores: %+v, %v; want 3 revisions, the in-place writes deltas", r, err)
	}
	restore(c, 1, p)
	l.stop(t)
	off, closeOff, err := Connect(ctx, store, false, quiet())
	mustDo(t, err)
	restore(off, 2, filepath.Join(store, liveDir, "big"))
	for rev := range want {
		_, data, err := CatBytes(ctx, off, Target{Path: "big"}, RevSpec{Rev: ptr(uint32(rev))})
		if err != nil || !bytes.Equal(data, want[rev]) {
			t.Errorf("cat --rev %d: %d bytes, equal %v, %v", rev, len(data), bytes.Equal(data, want[rev]), err)
		}
	}
	mustDo(t, closeOff())
	st, err := objstore.Open(store, objstore.Config{})
	mustDo(t, err)
	defer st.Close()
	sum, err := st.VerifyAll(ctx, func(p objstore.Problem) { t.Errorf("verify: %v", p) }, nil)
	if err != nil || sum.Problems != 0 || sum.Unhashed != 0 {
		t.Errorf("verify: %d problems, %d revisions unhashed (both restored, so hashed), %v", sum.Problems, sum.Unhashed, err)
	}
}

// TestSameText: the sink's compare of the live file with a restore's
// text, in memory or spilled, across its MiB blocks.
func TestSameText(t *testing.T) {
	text := bigText(3<<20 + 11)
	f, err := os.CreateTemp(t.TempDir(), "spill")
	mustDo(t, err)
	defer f.Close()
	_, err = f.Write(text)
	mustDo(t, err)
	for _, rt := range []*revText{{data: text, size: int64(len(text))}, {f: f, size: int64(len(text))}} {
		last := bytes.Clone(text)
		last[len(last)-1] ^= 1
		mid := bytes.Clone(text)
		mid[2<<20] ^= 1
		for _, c := range []struct {
			live []byte
			size int64
			want bool
		}{
			{text, int64(len(text)), true},
			{last, int64(len(text)), false},
			{mid, int64(len(text)), false},
			{text[:len(text)-1], int64(len(text)), false}, // the live file shorter than its report
			{text[:len(text)-1], int64(len(text) - 1), false},
		} {
			if got := sameText(bytes.NewReader(c.live), rt, c.size); got != c.want {
				t.Errorf("spilled %v: %d live bytes, size %d: %v, want %v", rt.f != nil, len(c.live), c.size, got, c.want)
			}
		}
	}
}
