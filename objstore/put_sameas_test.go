package objstore

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestPutSame: putting back the text of a revision stored from a delta
// alone (its hash deferred), once WriteText has rebuilt it in a file, is
// a dedup of it, read no more: the revision takes the content hash
// WriteText computed, which Get and Verify then check, and dedups find
// it. Without that rebuild, or with a size that is not the revision's,
// the put reads src as PutFrom does. A revision with its own hash is
// deduped at once.
func TestPutSame(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f, _ := s.NewFile("big")
	data := bigMixed(5, bigFull+2*chunkSize)
	full := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(data)})
	r := rand.New(rand.NewPCG(5, 5))
	edited, d := inPlace(t, r, data, 4096)
	edit := mustPut(t, s, deltaOnly(f, full.ID(), d, len(edited)))
	newer, d := inPlace(t, r, edited, 4096)
	last := mustPut(t, s, deltaOnly(f, edit.ID(), d, len(newer)))
	if edit.Flags&index.FlagHashDeferred == 0 {
		t.Fatalf("the in-place write's revision has flags %#x, want its hash deferred", edit.Flags)
	}
	srcReads := 0
	putSame := func(p1, same index.RevID, src []byte) index.Entry {
		t.Helper()
		read := false
		srcReads = 0
		e, commit, err := s.PutSameNoWait(ctx, PutRequest{File: f, P1: p1, P2: same}, same, readerFunc(func(b []byte, off int64) (int, error) {
			srcReads++
			return bytes.NewReader(src).ReadAt(b, off)
		}), int64(len(src)), func() { read = true })
		if err == nil {
			err = commit()
		}
		if err != nil || !read {
			t.Fatalf("PutSame of %v: %v (read signalled %v)", same, err, read)
		}
		if got, err := s.Get(ctx, e.ID()); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("revision %v: %d bytes, %v; want %d", e.ID(), len(got), err, len(src))
		}
		return e
	}
	// Not rebuilt in a file yet: no hash known, so a put of the text.
	if e := putSame(last.ID(), edit.ID(), edited); e.Kind == index.KindDedup {
		t.Fatalf("without a rebuild: a dedup of %v", e.Base)
	} else {
		last = e
	}
	w, err := os.Create(filepath.Join(t.TempDir(), "text"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if ok, err := s.WriteText(ctx, edit.ID(), w); !ok || err != nil {
		t.Fatalf("WriteText: %v, %v", ok, err)
	}
	e := putSame(last.ID(), edit.ID(), edited)
	if e.Kind != index.KindDedup || e.Base != edit.ID() || srcReads != 0 {
		t.Fatalf("after WriteText: kind %v of %v, %d reads of the text; want a dedup of %v, no read", e.Kind, e.Base, srcReads, edit.ID())
	}
	now, err := s.entry(edit.ID())
	if err != nil || now.Flags&index.FlagHashDeferred != 0 || now.Hash != s.cfg.hash(edited) || e.Hash != now.Hash {
		t.Fatalf("%v after the put: flags %#x, hash %x (dedup's %x), want the text's %x: %v", edit.ID(), now.Flags, now.Hash, e.Hash, s.cfg.hash(edited), err)
	}
	// Of the wrong size: put from src.
	if e := putSame(e.ID(), full.ID(), data[:len(data)-1]); e.Kind == index.KindDedup {
		t.Fatalf("a text of another size: a dedup of %v", e.Base)
	}
	// A revision with its own hash: a dedup without a rebuild.
	e = putSame(last.ID(), full.ID(), data)
	if e.Kind != index.KindDedup || e.Base != full.ID() || srcReads != 0 {
		t.Fatalf("of %v: kind %v of %v, %d reads of the text; want a dedup, no read", full.ID(), e.Kind, e.Base, srcReads)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	sum, err := s2.VerifyAll(ctx, func(p Problem) { t.Errorf("verify: %v", p) }, nil)
	if err != nil || sum.Unhashed != 1 {
		t.Errorf("verify: %d revisions unhashed, %v; want 1 (the newer in-place write)", sum.Unhashed, err)
	}
	if got, err := s2.Get(ctx, edit.ID()); err != nil || !bytes.Equal(got, edited) {
		t.Fatalf("%v after reopening: %v", edit.ID(), err)
	}
}

// readerFunc is an io.ReaderAt made of a function.
type readerFunc func([]byte, int64) (int, error)

func (f readerFunc) ReadAt(b []byte, off int64) (int, error) { return f(b, off) }
