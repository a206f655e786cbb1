package objstore

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"pgregory.net/rapid"
)

// mergeLine is one line of development of a merge history.
type mergeLine struct {
	blocks [][]byte
	head   index.RevID
}

// mergeHist is a file's history on nLines lines of development that
// edit blocks of the text and merge each other three-way per block (a
// block the merged-in line changed since the two lines' merge base is
// taken from it): the merges a two-base record is for.
type mergeHist struct {
	texts  map[index.RevID][]byte
	merges []index.RevID
}

// tester is what the merge helpers need of a *testing.T or *rapid.T.
type tester interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// writeMerges puts revs revisions of file f into s. pick chooses among
// n: a test's random source or rapid's.
func writeMerges(t tester, s *Store, f index.FileID, revs, nBlocks, nLines int, pick func(n int) int) *mergeHist {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(pick(1<<30)), 3))
	h := &mergeHist{texts: map[index.RevID][]byte{}}
	put := func(blocks [][]byte, p1, p2 index.RevID) index.RevID {
		text := bytes.Join(blocks, nil)
		e, err := s.Put(context.Background(), PutRequest{File: f, Data: bytes.Clone(text), P1: p1, P2: p2})
		if err != nil {
			t.Fatal(err)
		}
		id := e.ID()
		h.texts[id] = text
		return id
	}
	start := make([][]byte, nBlocks)
	for i := range start {
		start[i] = genText(r, 100+r.IntN(200))
		start[i] = append(start[i][:len(start[i]):len(start[i])], '\n')
	}
	first := put(start, index.NullRev, index.NullRev)
	lines := make([]*mergeLine, nLines)
	// anc[a][b]: the merge base of lines a and b, as blocks.
	anc := make([][][][]byte, nLines)
	for i := range lines {
		lines[i] = &mergeLine{blocks: clone2(start), head: first}
		anc[i] = make([][][]byte, nLines)
		for j := range anc[i] {
			anc[i][j] = clone2(start)
		}
	}
	for len(h.texts) < revs {
		m := lines[pick(nLines)]
		mi := indexOf(lines, m)
		oi := pick(nLines)
		if o := lines[oi]; oi != mi && pick(10) < 3 && o.head != m.head {
			merged := make([][]byte, nBlocks)
			for j := range merged {
				merged[j] = m.blocks[j]
				if !bytes.Equal(o.blocks[j], anc[mi][oi][j]) {
					merged[j] = o.blocks[j]
				}
			}
			p1, p2 := m.head, o.head
			m.head = put(merged, p1, p2)
			h.merges = append(h.merges, m.head)
			m.blocks = merged
			anc[mi][oi], anc[oi][mi] = clone2(o.blocks), clone2(o.blocks)
			continue
		}
		j := pick(nBlocks)
		m.blocks[j] = edit(r, m.blocks[j], 1+pick(2))
		m.head = put(m.blocks, m.head, index.NullRev)
	}
	return h
}

func clone2(b [][]byte) [][]byte {
	out := make([][]byte, len(b))
	copy(out, b)
	return out
}

func indexOf(lines []*mergeLine, l *mergeLine) int {
	for i := range lines {
		if lines[i] == l {
			return i
		}
	}
	return -1
}

// twoBaseCount counts the two-base records among ids.
func twoBaseCount(t tester, s *Store, h *mergeHist) int {
	t.Helper()
	n := 0
	for id := range h.texts {
		e, err := s.Entry(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == index.KindP1P2 {
			n++
		}
	}
	return n
}

// checkMerges reads every revision of h back from s, in a random order,
// and checks each graph read's memory against the held cap.
func checkMerges(t tester, s *Store, h *mergeHist, seed uint64) {
	t.Helper()
	ids := make([]index.RevID, 0, len(h.texts))
	for id := range h.texts {
		ids = append(ids, id)
	}
	r := rand.New(rand.NewPCG(seed, 9))
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids {
		got, err := s.Get(context.Background(), id)
		if err != nil || !bytes.Equal(got, h.texts[id]) {
			t.Fatalf("%v: %v (right bytes: %v)", id, err, bytes.Equal(got, h.texts[id]))
		}
		e, _ := s.Entry(id)
		if e.Kind != index.KindP1P2 {
			continue
		}
		g, err := s.walkGraph(id, e, caches{}, int(e.ChainLen))
		if err != nil {
			t.Fatal(err)
		}
		if held := g.peakHeld(); held > uint64(s.caps.MaxHeldRatio*float64(e.Size))+s.caps.MinReadBytes {
			t.Fatalf("%v: graph read holds %d bytes for a text of %d", id, held, e.Size)
		}
		if e.ChainLen > s.caps.MaxChainLen || e.ChainBytes > s.caps.readLimit(e.Size) {
			t.Fatalf("%v: caps broken: chain %d, %d bytes for %d", id, e.ChainLen, e.ChainBytes, e.Size)
		}
	}
}

func newMergeStore(t *testing.T, cfg Config, revs int) (string, index.FileID, *mergeHist) {
	t.Helper()
	s, dir := openNew(t, cfg)
	f := mustNewFile(t, s, "merged.txt")
	r := rand.New(rand.NewPCG(11, 12))
	h := writeMerges(t, s, f, revs, 48, 2, r.IntN)
	if n := twoBaseCount(t, s, h); n < len(h.merges)/4 {
		t.Fatalf("%d two-base records for %d merges", n, len(h.merges))
	}
	verifyClean(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, f, h
}

// TestTwoBaseRoundTrip: merges stored against both parents read back
// byte for byte with the cache on and off, stats count them, verify
// checks their graphs' chain facts, and the store's format is raised.
func TestTwoBaseRoundTrip(t *testing.T) {
	dir, _, h := newMergeStore(t, Config{SegmentSize: 32 << 10}, 300)
	for _, cache := range []int64{0, 1} {
		s, err := Open(dir, Config{CacheBytes: cache, LatestBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		checkMerges(t, s, h, uint64(cache))
		n := twoBaseCount(t, s, h)
		st, err := s.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.ByKind["p1+p2"] != int64(n) {
			t.Errorf("stats count %d p1+p2, the entries %d", st.ByKind["p1+p2"], n)
		}
		t.Logf("cache %d: %d merges, %d stored against both parents, %d bytes stored", cache, len(h.merges), n, st.StoredBytes)
		s.Close()
	}
	if v, err := readFormat(dir); err != nil || v != formatTwoBase {
		t.Fatalf("format %d, %v; want %d", v, err, formatTwoBase)
	}
}

// TestTwoBaseRaisesFormat: a format 4 store keeps its format (an older
// build still opens it) until its first two-base record.
func TestTwoBaseRaisesFormat(t *testing.T) {
	dir := t.TempDir()
	s := openAtFormat(t, dir, FormatMountIDs)
	f := mustNewFile(t, s, "f")
	r := rand.New(rand.NewPCG(1, 2))
	text := genText(r, 8000)
	prev := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text)}).ID()
	for range 5 {
		text = edit(r, text, 2)
		prev = mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text), P1: prev}).ID()
	}
	if v, err := readFormat(dir); err != nil || v != FormatMountIDs {
		t.Fatalf("format %d, %v after ordinary puts", v, err)
	}
	g := mustNewFile(t, s, "merged")
	h := writeMerges(t, s, g, 80, 32, 2, r.IntN)
	if twoBaseCount(t, s, h) == 0 {
		t.Fatal("no two-base record")
	}
	s.Close()
	if v, err := readFormat(dir); err != nil || v != formatTwoBase {
		t.Fatalf("format %d, %v after a two-base record", v, err)
	}
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkMerges(t, s, h, 1)
}

// TestTwoBaseCorruptBase2: a flipped byte in a two-base record's second
// base fails the reads of every revision whose graph holds it, each
// naming its file and revision, and no other; verify reports exactly
// those.
func TestTwoBaseCorruptBase2(t *testing.T) {
	dir, _, h := newMergeStore(t, Config{SegmentSize: 32 << 10}, 200)
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	entries := map[index.RevID]index.Entry{}
	var bad index.RevID
	for id := range h.texts {
		e, _ := s.Entry(id)
		entries[id] = e
	}
	for _, id := range h.merges {
		if e := entries[id]; e.Kind == index.KindP1P2 && entries[e.Base2].Kind != index.KindFull &&
			(bad.IsNull() || e.Base2.Rev > bad.Rev) {
			bad = e.Base2 // the newest: fewest dependents
		}
	}
	s.Close()
	if bad.IsNull() {
		t.Fatal("no two-base record on a delta")
	}
	be := entries[bad]
	flipByte(t, filepath.Join(dir, "segments", segName(be.Seg)), int64(be.Off)+int64(be.Stored)/2, 0x40)
	checkFlip(t, dir, entries, h.texts, bad)
}

// TestTwoBaseGC: gc removing the revisions a kept two-base record was
// stored against (its file's history, pruned) keeps it readable (stored
// again against what is kept), and one that removes nothing it needs
// keeps it as it is.
func TestTwoBaseGC(t *testing.T) {
	ctx := context.Background()
	dir, f, h := newMergeStore(t, Config{SegmentSize: 16 << 10}, 160)
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	var held []index.RevID
	for _, id := range h.merges {
		if e, _ := s.Entry(id); e.Kind == index.KindP1P2 && len(held) < 6 {
			held = append(held, id)
		}
	}
	refs := map[string]index.RevID{}
	for i, id := range held {
		refs[fmt.Sprint("m", i)] = id
	}
	root, trees := snapTree(t, refs)
	if _, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: "merges", Time: time.Unix(5, 0), Root: root, Trees: trees}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	live := func() (map[index.FileID]bool, error) { return map[index.FileID]bool{f: true}, nil }
	if rep, err := GC(ctx, dir, GCOptions{Live: live}); err != nil || rep.Removed != 0 {
		t.Fatalf("gc of a live history: %+v, %v", rep, err)
	}
	s, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	checkMerges(t, s, h, 3)
	s.Close()
	rep, err := GC(ctx, dir, GCOptions{Policy: GCPolicy{PruneUnsnapshotted: true}, Live: live})
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kept := &mergeHist{texts: map[index.RevID][]byte{}}
	newest := index.NullRev
	for id := range h.texts {
		if id.Rev > newest.Rev {
			newest = id
		}
	}
	for _, id := range append(held, newest) {
		kept.texts[id] = h.texts[id]
	}
	checkMerges(t, s, kept, 4)
	for id := range h.texts {
		if _, ok := kept.texts[id]; !ok {
			if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("pruned %v: %v", id, err)
			}
		}
	}
	if rep.Removed != int64(len(h.texts)-len(kept.texts)) {
		t.Errorf("removed %d of %d, kept %d", rep.Removed, len(h.texts), len(kept.texts))
	}
	verifyClean(t, s)
}

// TestTwoBaseRepack: repack keeps two-base records (verbatim with
// --reuse=auto, chosen again with never), reads back byte for byte, and
// a repacked store has nothing to change.
func TestTwoBaseRepack(t *testing.T) {
	dir, _, h := newMergeStore(t, Config{SegmentSize: 16 << 10}, 240)
	for _, reuse := range []Reuse{ReuseAuto, ReuseNever, ReuseAuto} {
		rep := mustRepack(t, dir, RepackOptions{Reuse: reuse, Jobs: 2, SegmentSize: 16 << 10})
		s, err := Open(dir, Config{CacheBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		checkMerges(t, s, h, 5)
		verifyClean(t, s)
		n := twoBaseCount(t, s, h)
		t.Logf("reuse %v: %d two-base records; %+v", reuse, n, rep)
		if n == 0 {
			t.Errorf("reuse %v: no two-base record left", reuse)
		}
		if reuse == ReuseAuto && rep.StoredAfter > rep.StoredBefore+rep.StoredBefore/100 {
			t.Errorf("reuse auto: %d -> %d bytes stored", rep.StoredBefore, rep.StoredAfter)
		}
		s.Close()
	}
	if rep := mustRepack(t, dir, RepackOptions{Jobs: 2, SegmentSize: 16 << 10}); !rep.Whole {
		t.Errorf("repack of a repacked store changed it: %+v", rep)
	}
}

// TestTwoBaseModel: random histories of 2-3 lines of development merging
// each other, under random caps, read back byte for byte in the store
// that wrote them and after a reopen with the cache off, and verify.
func TestTwoBaseModel(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		f.Value.Set("20")
		defer f.Value.Set(f.DefValue)
	}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "objstore-twobase")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		cfg := Config{Create: true, SegmentSize: 8 << 10,
			CacheBytes:   rapid.SampledFrom([]int64{1, 20 << 10, 0}).Draw(rt, "cache"),
			MaxChainLen:  uint32(rapid.IntRange(3, 40).Draw(rt, "maxchain")),
			MaxHeldRatio: rapid.SampledFrom([]float64{2, 4, 6, 8}).Draw(rt, "held")}
		s, err := Open(dir, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		f, err := s.NewFile("m")
		if err != nil {
			rt.Fatal(err)
		}
		pick := func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") }
		h := writeMerges(rt, s, f, rapid.IntRange(2, 60).Draw(rt, "revs"), rapid.IntRange(1, 12).Draw(rt, "blocks"),
			rapid.IntRange(2, 3).Draw(rt, "lines"), pick)
		checkMerges(rt, s, h, 7)
		s.Close()
		s, err = Open(dir, Config{CacheBytes: 1, LatestBytes: 1, MaxChainLen: cfg.MaxChainLen, MaxHeldRatio: cfg.MaxHeldRatio})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		checkMerges(rt, s, h, 8)
		n, err := s.Verify(context.Background(), func(p Problem) { rt.Errorf("verify: %v", p) })
		if err != nil || n != 0 {
			rt.Fatalf("verify: %d problems, %v", n, err)
		}
	})
}
