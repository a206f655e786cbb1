package objstore

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// revs returns how many revisions file f has, as committed.
func revs(t *testing.T, s *Store, f index.FileID) uint32 {
	t.Helper()
	m, err := s.File(f)
	if err != nil {
		t.Fatal(err)
	}
	return m.Revs
}

// TestPutSkipSame: a put with SkipSame of the text its first parent (the
// file's newest revision) has stores nothing and returns that revision,
// whether the parent has a content hash or was stored from written
// ranges (its hash deferred), and from memory or from a big file; a new
// name is still taken. A text that differs by a byte, a parent that is
// not the newest, or a put without SkipSame each add a revision.
func TestPutSkipSame(t *testing.T) {
	s, dir := openNew(t, Config{})
	r := rand.New(rand.NewPCG(7, 7))
	f := mustNewFile(t, s, "f")
	text := genText(r, 256<<10)
	first := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text)})

	before := segmentsSize(t, dir)
	same := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text), P1: first.ID(), SkipSame: true, Name: "g"})
	if same != first || revs(t, s, f) != 1 || segmentsSize(t, dir) != before {
		t.Fatalf("same text: got %+v, %d revisions, segments %d -> %d bytes; want %+v, 1 revision, nothing stored",
			same, revs(t, s, f), before, segmentsSize(t, dir), first)
	}
	if m, _ := s.File(f); m.Name != "g" {
		t.Errorf("name after a skipped put with a new name: %q, want g", m.Name)
	}

	edited := bytes.Clone(text)
	edited[len(edited)/2] ^= 1
	second := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(edited), P1: first.ID(), SkipSame: true})
	if second.Rev != 1 || !bytes.Equal(mustGet(t, s, second.ID()), edited) {
		t.Fatalf("a one-byte change: revision %v, want revision 1 with the change", second.ID())
	}
	// P1 not the newest: what it names is history, not the file now.
	if e := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text), P1: first.ID(), SkipSame: true}); e.Rev != 2 {
		t.Fatalf("the text of an older parent: revision %v, want a new revision 2", e.ID())
	}
	if e := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text), P1: index.RevID{File: f, Rev: 2}}); e.Rev != 3 || e.Kind != index.KindDedup {
		t.Fatalf("without SkipSame: revision %v kind %v, want a dedup revision 3", e.ID(), e.Kind)
	}

	// A parent stored from its written ranges has no content hash.
	next, d := inPlace(t, r, text, 4096)
	dl := mustPut(t, s, deltaOnly(f, index.RevID{File: f, Rev: 3}, d, len(next)))
	if dl.Flags&index.FlagHashDeferred == 0 {
		t.Fatalf("delta-only put: flags %v, want the hash deferred", dl.Flags)
	}
	if e := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(next), P1: dl.ID(), SkipSame: true}); e != dl || revs(t, s, f) != 5 {
		t.Fatalf("the text of a parent with its hash deferred: %v, %d revisions; want %v, 5", e.ID(), revs(t, s, f), dl.ID())
	}

	// A big file, compared without reading it whole (PutFrom's dedupFrom).
	big := bigMixed(5, bigFull+chunkSize+11)
	src := srcFile(t, big)
	g := mustNewFile(t, s, "big")
	b0 := putFrom(t, s, "big", src, int64(len(big)), PutRequest{File: g})
	before = segmentsSize(t, dir)
	if e := putFrom(t, s, "big", src, int64(len(big)), PutRequest{File: g, P1: b0.ID(), SkipSame: true}); e != b0 || revs(t, s, g) != 1 || segmentsSize(t, dir) != before {
		t.Fatalf("the same big file: %v, %d revisions; want %v alone, nothing stored", e.ID(), revs(t, s, g), b0.ID())
	}
	big[len(big)-1] ^= 1
	if e := putFrom(t, s, "big", srcFile(t, big), int64(len(big)), PutRequest{File: g, P1: b0.ID(), SkipSame: true}); e.Rev != 1 || !bytes.Equal(mustGet(t, s, e.ID()), big) {
		t.Fatalf("a big file changed in its last byte: revision %v, want revision 1 with the change", e.ID())
	}
	verifyClean(t, s)
}
