package objstore

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestPutNoWait: a revision put without waiting reads back and serves as the
// next put's parent before it is committed; committing the later one
// commits both, in one group commit.
func TestPutNoWait(t *testing.T) {
	s, dir := openNew(t, Config{})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	f, err := s.NewFile("f")
	if err != nil {
		t.Fatal(err)
	}
	v0 := genText(r, 1<<20)
	v1 := edit(r, v0, 3)
	e0, _, err := s.PutNoWait(ctx, PutRequest{File: f, Data: v0})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, e0.ID()); err != nil || !bytes.Equal(got, v0) {
		t.Fatalf("uncommitted revision reads back wrong (%v)", err)
	}
	if m, err := s.File(f); err != nil || m.Revs != 0 {
		t.Fatalf("file record before any commit: %+v, %v; want no revisions committed", m, err)
	}
	commits := s.commits.Load()
	e1, commit, err := s.PutNoWait(ctx, PutRequest{File: f, Data: v1, P1: e0.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if e1.Kind != index.KindP1 || e1.Base != e0.ID() {
		t.Errorf("second revision stored as %v against %v, want a delta against %v", e1.Kind, e1.Base, e0.ID())
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	if n := s.commits.Load() - commits; n != 1 {
		t.Errorf("%d group commits, want 1", n)
	}
	if m, err := s.File(f); err != nil || m.Revs != 2 {
		t.Fatalf("file record after the commit: %+v, %v; want 2 revisions", m, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for _, c := range []struct {
		id   index.RevID
		want []byte
	}{{e0.ID(), v0}, {e1.ID(), v1}} {
		if got, err := s2.Get(ctx, c.id); err != nil || !bytes.Equal(got, c.want) {
			t.Fatalf("%v after reopening reads back wrong (%v)", c.id, err)
		}
	}
}

// TestBigFulltext: a fulltext of bigFull bytes or more is stored chunked,
// its chunks S2 if they compress, raw if not (a few bytes over the
// text), and reads back either way.
func TestBigFulltext(t *testing.T) {
	s, _ := openNew(t, Config{})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	text := genText(r, bigFull+12345)
	noise := make([]byte, bigFull+999)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	for _, c := range []struct {
		name       string
		data       []byte
		compressed bool
	}{{"text", text, true}, {"random", noise, false}} {
		f, err := s.NewFile(c.name)
		if err != nil {
			t.Fatal(err)
		}
		e, err := s.Put(ctx, PutRequest{File: f, Data: c.data})
		if err != nil {
			t.Fatal(err)
		}
		if chunked := e.Flags&recFlagChunked != 0; !chunked || e.Kind != index.KindFull {
			t.Errorf("%s: stored as %v, chunked %v (%d bytes of %d); want a chunked fulltext",
				c.name, e.Kind, chunked, e.Stored, len(c.data))
		}
		if !c.compressed && uint64(e.Stored) > uint64(len(c.data))+recOverhead+chunkHeaderLen+chunkEntryLen*uint64(len(c.data)/chunkSize+1) {
			t.Errorf("%s: %d bytes stored for %d incompressible ones", c.name, e.Stored, len(c.data))
		}
		if c.compressed && uint64(e.Stored) > uint64(len(c.data))/2 {
			t.Errorf("%s: %d bytes stored for %d", c.name, e.Stored, len(c.data))
		}
		s.cache.clear()
		s.latest.clear()
		if got, err := s.Get(ctx, e.ID()); err != nil || !bytes.Equal(got, c.data) {
			t.Fatalf("%s reads back wrong (%v)", c.name, err)
		}
	}
}
