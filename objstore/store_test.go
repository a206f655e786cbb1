package objstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/index"
)

func TestRoundTripManyFiles(t *testing.T) {
	s, dir := openNew(t, Config{SegmentSize: 64 << 10}) // small segments: exercise rolling
	r := rand.New(rand.NewPCG(1, 2))
	const files, revs = 6, 40
	want := map[index.RevID][]byte{}
	for f := range files {
		id := mustNewFile(t, s, fmt.Sprintf("f%d", f))
		text := genText(r, 2000+r.IntN(30000))
		var prev index.RevID
		for range revs {
			e := mustPut(t, s, PutRequest{File: id, Data: text, P1: prev})
			want[e.ID()] = text
			prev = e.ID()
			text = edit(r, text, 1+r.IntN(4))
		}
	}
	check := func(s *Store) {
		for id, text := range want {
			if got := mustGet(t, s, id); !bytes.Equal(got, text) {
				t.Fatalf("%v: wrong bytes", id)
			}
		}
		verifyClean(t, s)
	}
	check(s)
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Revisions != files*revs || st.Files != files || st.StoredBytes >= st.LogicalBytes/5 {
		t.Fatalf("stats %+v", st)
	}
	if st.ByKind["p1"] < files*(revs-2) {
		t.Fatalf("expected mostly p1 deltas: %+v", st.ByKind)
	}
	s.Close()
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	check(s2)
	// New revisions after reopen continue the numbering.
	e := mustPut(t, s2, PutRequest{File: 1, Data: []byte("after reopen")})
	if e.Rev != revs {
		t.Fatalf("rev after reopen = %d, want %d", e.Rev, revs)
	}
}

func TestGeneralDeltaAndBestOfParents(t *testing.T) {
	s, _ := openNew(t, Config{})
	r := rand.New(rand.NewPCG(3, 4))
	f := mustNewFile(t, s, "merge.txt")
	base := genText(r, 50_000)
	root := mustPut(t, s, PutRequest{File: f, Data: base})
	// Two lines of history that diverge a lot from each other.
	a, b := base, base
	var ea, eb = root, root
	for range 5 {
		a = edit(r, a, 40)
		ea = mustPut(t, s, PutRequest{File: f, Data: a, P1: ea.ID()})
		b = edit(r, b, 40)
		eb = mustPut(t, s, PutRequest{File: f, Data: b, P1: eb.ID()})
	}
	// A merge whose content is b plus a tiny change: closer to p2.
	merged := edit(r, b, 1)
	m := mustPut(t, s, PutRequest{File: f, Data: merged, P1: ea.ID(), P2: eb.ID()})
	if m.Kind != index.KindP2 || m.Base != eb.ID() {
		t.Fatalf("merge stored as %v against %v, want p2 against %v", m.Kind, m.Base, eb.ID())
	}
	// Generaldelta: the base is not the previous revision (which is eb's
	// sibling line... the previous rev is eb itself here, so check line a).
	if ea.Base != (index.RevID{File: f, Rev: ea.Rev - 2}) {
		t.Fatalf("line a rev %d based on %v, want its parent two revisions back", ea.Rev, ea.Base)
	}
	if !bytes.Equal(mustGet(t, s, m.ID()), merged) {
		t.Fatal("merge reads back wrong")
	}

	// The same merge with best-of-parents off goes against p1 and is bigger.
	s1, _ := openNew(t, Config{P1Only: true})
	f1 := mustNewFile(t, s1, "merge.txt")
	var ids []index.RevID
	// Put eb before ea, so that the latest snapshot is not eb's content.
	for _, e := range []index.Entry{root, eb, ea} {
		text := mustGet(t, s, e.ID())
		ids = append(ids, mustPut(t, s1, PutRequest{File: f1, Data: text}).ID())
	}
	m1 := mustPut(t, s1, PutRequest{File: f1, Data: merged, P1: ids[2], P2: ids[1]})
	if m1.Kind == index.KindP2 || m1.Stored <= m.Stored {
		t.Fatalf("p1-only merge: kind %v stored %d; best-of-parents stored %d", m1.Kind, m1.Stored, m.Stored)
	}
}

func TestDedupConfirmsBytes(t *testing.T) {
	s, _ := openNew(t, Config{})
	f := mustNewFile(t, s, "a")
	g := mustNewFile(t, s, "b")
	text := genText(rand.New(rand.NewPCG(5, 6)), 10_000)
	e1 := mustPut(t, s, PutRequest{File: f, Data: text})
	e2 := mustPut(t, s, PutRequest{File: g, Data: text})
	if e2.Kind != index.KindDedup || e2.Base != e1.ID() || e2.Stored != 0 {
		t.Fatalf("identical content not deduplicated: %+v", e2)
	}
	if !bytes.Equal(mustGet(t, s, e2.ID()), text) {
		t.Fatal("dedup reads back wrong")
	}

	// Force every hash to collide: different contents must still be stored
	// separately, because dedup compares the bytes.
	c, _ := openNew(t, Config{hash: func([]byte) uint64 { return 42 }})
	h := mustNewFile(t, c, "collide")
	x := mustPut(t, c, PutRequest{File: h, Data: []byte("first content, long enough to matter")})
	y := mustPut(t, c, PutRequest{File: h, Data: []byte("other content, same length as first!")})
	if y.Kind == index.KindDedup {
		t.Fatalf("hash collision deduplicated different bytes: %+v", y)
	}
	z := mustPut(t, c, PutRequest{File: h, Data: []byte("other content, same length as first!")})
	if z.Kind != index.KindDedup || z.Base != y.ID() {
		t.Fatalf("same bytes among colliding hashes: %+v", z)
	}
	for id, want := range map[index.RevID]string{x.ID(): "first content, long enough to matter", z.ID(): "other content, same length as first!"} {
		if got := mustGet(t, c, id); string(got) != want {
			t.Fatalf("%v = %q", id, got)
		}
	}
	verifyClean(t, c)
}

func TestCapsOnLongHistory(t *testing.T) {
	const maxChain = 20
	s, _ := openNew(t, Config{MaxChainLen: maxChain, MaxReadRatio: 2})
	r := rand.New(rand.NewPCG(7, 8))
	f := mustNewFile(t, s, "long")
	text := genText(r, 20_000)
	var prev index.RevID
	var last index.Entry
	for i := range 300 {
		// Every 50 revisions, a big rewrite, so the read cap matters too.
		n := 2
		if i%50 == 49 {
			n = 200
		}
		text = edit(r, text, n)
		last = mustPut(t, s, PutRequest{File: f, Data: text, P1: prev})
		prev = last.ID()
	}
	err := s.idx.Revisions(context.Background(), f, func(e index.Entry) error {
		if e.ChainLen > maxChain {
			t.Errorf("%v: chain %d > cap %d", e.ID(), e.ChainLen, maxChain)
		}
		if lim := s.caps.readLimit(e.Size); e.ChainBytes > lim {
			t.Errorf("%v: reads %d > limit %d", e.ID(), e.ChainBytes, lim)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Stats(context.Background())
	if st.ChainMax != maxChain {
		t.Errorf("chain max %d: the cap never bit", st.ChainMax)
	}
	if st.ByKind["full"] > 300/maxChain {
		t.Errorf("too many fulltexts: %+v (snapshots should carry the history)", st.ByKind)
	}
	if !bytes.Equal(mustGet(t, s, last.ID()), text) {
		t.Fatal("newest reads back wrong")
	}
	t.Logf("kinds %v chain max %d mean %.1f stored %d of %d", st.ByKind, st.ChainMax, st.ChainMean, st.StoredBytes, st.LogicalBytes)
}

// TestIngestLeavesReadCache: the snapshot texts a put rebuilds to choose
// an intermediate snapshot's base stay out of the read cache, so a long
// linear ingest (every parent in the latest-text cache) leaves it empty.
func TestIngestLeavesReadCache(t *testing.T) {
	s, _ := openNew(t, Config{MaxChainLen: 8})
	r := rand.New(rand.NewPCG(9, 10))
	f := mustNewFile(t, s, "f")
	text := genText(r, 50_000)
	var prev index.RevID
	for i := range 100 {
		// A numbered line makes every revision distinct: no dedups, whose
		// parents are rebuilt through the read cache like any read.
		text = append(edit(r, text, 2), fmt.Sprintf("revision %d\n", i)...)
		prev = mustPut(t, s, PutRequest{File: f, Data: text, P1: prev}).ID()
	}
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ByKind["intermediate"] < 5 {
		t.Fatalf("kinds %v: too few snapshots to test", st.ByKind)
	}
	if st.CacheEntries != 0 {
		t.Errorf("read cache holds %d texts (%d bytes) after puts alone", st.CacheEntries, st.CacheBytes)
	}
	if !bytes.Equal(mustGet(t, s, prev), text) {
		t.Fatal("newest reads back wrong")
	}
	verifyClean(t, s)
}

// TestBestOfParentsShrinksMerges: on a merge-heavy history (S2's shape)
// best-of-parents stores at least 20% less than p1-only.
func TestBestOfParentsShrinksMerges(t *testing.T) {
	if testing.Short() {
		t.Skip("800 puts of 200 KiB")
	}
	size := func(p1only bool) uint64 {
		s, _ := openNew(t, Config{P1Only: p1only})
		mergeHistory(t, s, 400)
		st, err := s.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		verifyClean(t, s)
		return st.StoredBytes
	}
	best, p1 := size(false), size(true)
	t.Logf("best-of-parents %d bytes, p1-only %d (%.1f%% smaller)", best, p1, 100*(1-float64(best)/float64(p1)))
	if float64(best) > 0.8*float64(p1) {
		t.Fatalf("best-of-parents %d bytes is not 20%% below p1-only %d", best, p1)
	}
}

func TestHintForCopies(t *testing.T) {
	s, _ := openNew(t, Config{})
	r := rand.New(rand.NewPCG(19, 20))
	src := mustNewFile(t, s, "src")
	text := genText(r, 30_000)
	se := mustPut(t, s, PutRequest{File: src, Data: text})
	dst := mustNewFile(t, s, "copy")
	copied := edit(r, text, 2)
	e := mustPut(t, s, PutRequest{File: dst, Data: copied, Hints: []index.RevID{se.ID()}})
	if e.Kind != index.KindHint || e.Base != se.ID() || e.Stored > 500 {
		t.Fatalf("copy with a hint stored as %v against %v, %d bytes", e.Kind, e.Base, e.Stored)
	}
	if !bytes.Equal(mustGet(t, s, e.ID()), copied) {
		t.Fatal("copy reads back wrong")
	}
}

// TestNewFilesKeepsRecords: the writer's copies of the records NewFiles
// made are what the index holds, the first put of each starts from them
// (revision 0, then 1 in the index), and a reopened store agrees.
func TestNewFilesKeepsRecords(t *testing.T) {
	s, dir := openNew(t, Config{FastFulltexts: true})
	names := []string{"a/one.go", "a/two.go", "b/three.go"}
	ids, err := s.NewFiles(names)
	if err != nil {
		t.Fatal(err)
	}
	one := mustNewFile(t, s, "c/four.go") // NewFile goes through NewFiles
	ids, names = append(ids, one), append(names, "c/four.go")
	for i, id := range ids {
		s.wmu.Lock()
		kept := s.files[id]
		s.wmu.Unlock()
		stored, err := s.idx.File(id)
		if err != nil {
			t.Fatal(err)
		}
		if kept == nil || *kept != stored || stored.Name != names[i] || stored.Revs != 0 {
			t.Fatalf("file %d: writer's record %+v, index's %+v; want name %q, no revisions", id, kept, stored, names[i])
		}
	}
	for i, id := range ids[:2] {
		if e := mustPut(t, s, PutRequest{File: id, Data: []byte(names[i] + " text")}); e.Rev != 0 {
			t.Fatalf("first put of file %d is revision %d", id, e.Rev)
		}
	}
	s.Close()
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for i, id := range ids {
		m, err := s2.File(id)
		want := uint32(0)
		if i < 2 {
			want = 1
		}
		if err != nil || m.Name != names[i] || m.Revs != want {
			t.Fatalf("reopened: file %d is %+v (%v); want %q with %d revisions", id, m, err, names[i], want)
		}
	}
	if got := mustGet(t, s2, index.RevID{File: ids[1], Rev: 0}); string(got) != names[1]+" text" {
		t.Fatalf("reopened: file %d reads %q", ids[1], got)
	}
}
