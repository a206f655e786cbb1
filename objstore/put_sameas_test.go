package objstore

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
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
		e, commit, err := s.PutSameNoWait(ctx, PutRequest{File: f, P1: p1, P2: same}, same, s.TakeBacks(), readerFunc(func(b []byte, off int64) (int, error) {
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

// blockedHash is a WriteText file that holds the final read of the text
// (writeDeltaText's hash, after its Truncate) until release is closed.
type blockedHash struct {
	*os.File
	mu        sync.Mutex
	truncated bool
	once      sync.Once
	reached   chan struct{}
	release   chan struct{}
}

func (b *blockedHash) Truncate(n int64) error {
	b.mu.Lock()
	b.truncated = true
	b.mu.Unlock()
	return b.File.Truncate(n)
}

func (b *blockedHash) ReadAt(p []byte, off int64) (int, error) {
	b.mu.Lock()
	held := b.truncated && off == 0
	b.mu.Unlock()
	if held {
		b.once.Do(func() { close(b.reached); <-b.release })
	}
	return b.File.ReadAt(p, off)
}

// refuseCommit does to the open batch what a commit the index refuses
// (a full disk) does: the store takes its puts back, their revision
// numbers free again.
func refuseCommit(s *Store) {
	s.cmu.Lock()
	s.wmu.Lock()
	cur := s.open
	s.open = nil
	dirty := s.segs.takeDirty()
	s.wmu.Unlock()
	_ = s.segs.sync(dirty)
	err := errors.New("refused (a full disk)")
	if terr := s.takeBack(cur, err); terr != nil {
		panic(terr)
	}
	cur.err = err
	s.unpend(cur)
	close(cur.done)
	s.cmu.Unlock()
}

// pendingEdit is a new store holding a big fulltext of file f and,
// appended but not committed, an in-place write on it (its hash
// deferred), with an empty file to rebuild texts in.
type pendingEdit struct {
	s            *Store
	f            index.FileID
	data, edited []byte
	full, edit   index.Entry
	commit       func() error
	gen          uint64 // TakeBacks before the edit was put
	r            *rand.Rand
	out          *os.File
}

func newPendingEdit(t *testing.T) *pendingEdit {
	t.Helper()
	p := &pendingEdit{r: rand.New(rand.NewPCG(5, 5))}
	p.s, _ = openNew(t, Config{})
	p.f = mustNewFile(t, p.s, "big")
	p.data = bigMixed(5, bigFull+2*chunkSize)
	p.full = mustPut(t, p.s, PutRequest{File: p.f, Data: bytes.Clone(p.data)})
	edited, d := inPlace(t, p.r, p.data, 4096)
	p.edited, p.gen = edited, p.s.TakeBacks()
	var err error
	if p.edit, p.commit, err = p.s.PutDeltaNoWait(context.Background(), deltaOnly(p.f, p.full.ID(), d, len(edited))); err != nil {
		t.Fatal(err)
	}
	if p.out, err = os.Create(filepath.Join(t.TempDir(), "text")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.out.Close() })
	return p
}

// TestPutSameAfterTakeBack (a review): a revision read while pending and
// then taken back has its number given to another text. A hash learned
// from the first text while the take-back happened is not kept, and a
// PutSame that vouches for the number as read before the take-back puts
// the text whole: either way the new revision under that number would
// have taken the old text's hash (reading as corrupt for ever), or its
// dedup the new text's content (a restore recorded with bytes it did
// not write).
func TestPutSameAfterTakeBack(t *testing.T) {
	ctx := context.Background()
	p := newPendingEdit(t)
	s, f, data, full, r, oldX, x, of := p.s, p.f, p.data, p.full, p.r, p.edited, p.edit, p.out
	gen := p.gen
	bf := &blockedHash{File: of, reached: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error)
	go func() { _, err := s.WriteText(ctx, x.ID(), bf); done <- err }()
	<-bf.reached
	refuseCommit(s)
	close(bf.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	newX, d2 := inPlace(t, r, data, 4096)
	x2 := mustPut(t, s, deltaOnly(f, full.ID(), d2, len(newX)))
	if x2.ID() != x.ID() {
		t.Fatalf("the number was not given out again: %v, then %v", x.ID(), x2.ID())
	}
	// The learned hash, were it kept, would now be x2's.
	e, commit, err := s.PutSameNoWait(ctx, PutRequest{File: f, P1: x2.ID(), P2: x2.ID()}, x2.ID(), s.TakeBacks(), bytes.NewReader(newX), int64(len(newX)), nil)
	if err == nil {
		err = commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []index.RevID{x2.ID(), e.ID()} {
		if got, err := s.Get(ctx, id); err != nil || !bytes.Equal(got, newX) {
			t.Errorf("%v: %d bytes, %v; want the new text", id, len(got), err)
		}
	}
	// A caller that read x before the take-back vouches for it with gen:
	// the put reads its src (the old text) rather than share x2's.
	e, commit, err = s.PutSameNoWait(ctx, PutRequest{File: f, P1: e.ID(), P2: x2.ID()}, x2.ID(), gen, bytes.NewReader(oldX), int64(len(oldX)), nil)
	if err == nil {
		err = commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, e.ID()); err != nil || !bytes.Equal(got, oldX) || e.Kind == index.KindDedup && e.Base == x2.ID() {
		t.Errorf("%v (kind %v of %v): %v; want the old text, as written", e.ID(), e.Kind, e.Base, err)
	}
}

// TestPutSameOfAPendingTarget (a review): a deferred-hash revision still
// in a batch being committed is not filled in (the commit's unpend would
// drop the filled entry, and the dedup read against the deferred one as
// a bad target until the next commit): the put reads its src instead.
func TestPutSameOfAPendingTarget(t *testing.T) {
	ctx := context.Background()
	p := newPendingEdit(t)
	s, f, tx, te, tcommit, of := p.s, p.f, p.edited, p.edit, p.commit, p.out
	if ok, err := s.WriteText(ctx, te.ID(), of); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// A commit leader has taken the open batch, te's, and flushes it.
	s.cmu.Lock()
	s.wmu.Lock()
	cur := s.open
	s.open = nil
	dirty := s.segs.takeDirty()
	s.wmu.Unlock()
	e, commit, err := s.PutSameNoWait(ctx, PutRequest{File: f, P1: te.ID(), P2: te.ID()}, te.ID(), s.TakeBacks(), bytes.NewReader(tx), int64(len(tx)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cur.err = s.flush(cur, dirty)
	s.unpend(cur)
	close(cur.done)
	s.cmu.Unlock()
	if err := tcommit(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, e.ID()); err != nil || !bytes.Equal(got, tx) {
		t.Errorf("%v before its commit: %v", e.ID(), err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, e.ID()); err != nil || !bytes.Equal(got, tx) {
		t.Errorf("%v after its commit: %v", e.ID(), err)
	}
}
