package mount

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// bigText is n bytes of compressible, non-repeating text.
func bigText(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"delta ", "chain ", "revlog ", "snapshot ", "mount ", "fsync ", "\n"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

// TestCatAndRestoreOfBigRevisions: a revision of textSpillMin bytes or
// more, a chunked fulltext or a delta on one, is written by the store
// into a file for cat and restore, and streamed through the control
// socket, never read whole (a user review: an offline restore of 128 MiB
// peaked at 584 MB); every path gives back the revision's exact bytes.
func TestCatAndRestoreOfBigRevisions(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	ctx := context.Background()
	v0 := bigText(textSpillMin + 5<<20 + 123)
	p := filepath.Join(l.mnt, "big")
	mustDo(t, os.WriteFile(p, v0, 0o644))
	l.recorded(t, 1)
	v1 := bytes.Clone(v0)
	copy(v1[1<<20:], bytes.Repeat([]byte("in place "), 455))
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	mustDo(t, err)
	_, err = f.WriteAt(v1[1<<20:1<<20+4096], 1<<20)
	mustDo(t, err)
	mustDo(t, f.Close())
	l.recorded(t, 2)

	want := [][]byte{v0, v1}
	catAll := func(c Controller, how string, wantType func(Text) bool) {
		t.Helper()
		for rev := range uint32(2) {
			r, text, err := c.Cat(ctx, Target{Path: "big"}, RevSpec{Rev: ptr(rev)})
			if err != nil {
				t.Fatalf("%s cat --rev %d: %v", how, rev, err)
			}
			if !wantType(text) {
				t.Errorf("%s cat --rev %d: a %T", how, rev, text)
			}
			var got bytes.Buffer
			n, err := text.WriteTo(&got)
			mustDo(t, errors.Join(err, text.Close()))
			if r.Revision.Rev != rev || n != int64(len(want[rev])) || text.Size() != n || !bytes.Equal(got.Bytes(), want[rev]) {
				t.Errorf("%s cat --rev %d: revision %d, %d bytes (size %d), equal %v", how, rev, r.Revision.Rev, n, text.Size(), bytes.Equal(got.Bytes(), want[rev]))
			}
		}
	}
	c := connect(t, l.mnt, false)
	catAll(c, "mounted", func(x Text) bool { _, ok := x.(*connText); return ok })
	if _, err := c.Restore(ctx, Target{Path: "big"}, ptr(uint32(0))); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, v0) {
		t.Fatalf("mounted restore: %d bytes, equal %v, %v", len(got), bytes.Equal(got, v0), err)
	}
	l.stop(t)

	off := connect(t, store, false)
	catAll(off, "offline", func(x Text) bool { rt, ok := x.(*revText); return ok && rt.f != nil })
	_, err = off.Restore(ctx, Target{Path: "big"}, ptr(uint32(1)))
	mustDo(t, err)
	if got, err := os.ReadFile(filepath.Join(store, liveDir, "big")); err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("offline restore: %d bytes, equal %v, %v", len(got), bytes.Equal(got, v1), err)
	}
	if r, data, err := CatBytes(ctx, off, Target{Path: "big"}, RevSpec{}); err != nil || r.Revision.Rev != 3 || !bytes.Equal(data, v1) {
		t.Errorf("the offline restore's revision: %d, %d bytes, equal %v, %v", r.Revision.Rev, len(data), bytes.Equal(data, v1), err)
	}
}

// TestRestoreThatWroteNothingSaysSo: a restore whose rewrite failed to
// open the file (the mount point gone at an unmount) does not say the
// file was left partly overwritten; one that failed after it does.
func TestRestoreThatWroteNothingSaysSo(t *testing.T) {
	lf := liveFile{Rel: "f"}
	prev := index.RevID{File: 1, Rev: 6}
	text := &revText{data: []byte("x"), size: 1}
	gone := func() (*os.File, error) { return openBeneath(filepath.Join(t.TempDir(), "gone"), "f", os.O_WRONLY, 0) }
	err := partly(rewrite(gone, text, 1, false), lf, prev)
	if err == nil || strings.Contains(err.Error(), "partly overwritten") {
		t.Errorf("a rewrite that opened nothing: %v", err)
	}
	if err := partly(errors.New("write: no space left on device"), lf, prev); !strings.Contains(err.Error(), "partly overwritten: its content before was revision 6") {
		t.Errorf("a rewrite that failed writing: %v", err)
	}
}
