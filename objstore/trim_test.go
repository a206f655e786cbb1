package objstore

import (
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestCacheChargesCapacity: a cached value keeps its whole backing array
// from the garbage collector, so the cache charges its capacity. A short
// text in a big array (a recycled read buffer) counted by its length let
// the fulltext cache hold more than its budget.
func TestCacheChargesCapacity(t *testing.T) {
	c := newLRU[int](1 << 20)
	for i := range 8 {
		if !c.add(i, make([]byte, 1<<10, 256<<10)) { // 1 KiB in 256 KiB
			t.Fatalf("value %d not cached", i)
		}
		if used, _ := c.size(); used > 1<<20 {
			t.Fatalf("after %d values the cache is charged %d bytes, over its budget", i+1, used)
		}
	}
	if used, n := c.size(); n != 4 || used != 4*(256<<10) {
		t.Fatalf("cache holds %d values charged %d bytes, want the newest 4 charged their 256 KiB arrays", n, used)
	}
	if c.add(99, make([]byte, 1, 2<<20)) {
		t.Fatal("a value whose array is over the budget was cached")
	}
	if got := c.clear(); got != 4*(256<<10) {
		t.Fatalf("clear dropped %d bytes, want %d", got, 4*(256<<10))
	}
	if used, n := c.size(); used != 0 || n != 0 {
		t.Fatalf("after clear: %d values, %d bytes", n, used)
	}
}

// TestGetBufNoBigArrayForSmallText: a recycled buffer much bigger than
// the text asked for is not handed out (the text may be cached, pinning
// the whole array).
func TestGetBufNoBigArrayForSmallText(t *testing.T) {
	s, _ := openNew(t, Config{})
	big := make([]byte, 0, 1<<20)
	s.putBuf(big)
	if b := s.getBuf(2 << 10); uint64(cap(b)) > max(2*(2<<10), bufSlack) {
		t.Fatalf("getBuf(2 KiB) gave a buffer of %d bytes", cap(b))
	}
	s.putBuf(big)
	if b := s.getBuf(600 << 10); cap(b) != cap(big) {
		t.Logf("a 1 MiB buffer not reused for 600 KiB (the pool may have dropped it): cap %d", cap(b))
	}
}

// TestDropCaches: DropCaches empties both text caches, CacheUses moves
// with reads and puts and not otherwise, and what was cached is read
// again from the segments.
func TestDropCaches(t *testing.T) {
	s, _ := openNew(t, Config{})
	r := rand.New(rand.NewPCG(21, 22))
	f := mustNewFile(t, s, "d")
	text := genText(r, 20_000)
	var ids []index.RevID
	var texts [][]byte
	var prev index.RevID
	for range 5 {
		e := mustPut(t, s, PutRequest{File: f, Data: text, P1: prev})
		ids, texts = append(ids, e.ID()), append(texts, text)
		prev, text = e.ID(), edit(r, text, 2)
	}
	for _, id := range ids[:3] {
		mustGet(t, s, id)
	}
	full, _ := s.cache.size()
	latest, _ := s.latest.size()
	if full == 0 || latest == 0 {
		t.Fatalf("caches not filled: fulltext %d, latest %d bytes", full, latest)
	}
	u := s.CacheUses()
	if got := s.DropCaches(); got != full+latest {
		t.Fatalf("DropCaches dropped %d bytes, the caches held %d", got, full+latest)
	}
	if full, _ := s.cache.size(); full != 0 {
		t.Fatalf("fulltext cache holds %d bytes after DropCaches", full)
	}
	if latest, _ := s.latest.size(); latest != 0 {
		t.Fatalf("latest cache holds %d bytes after DropCaches", latest)
	}
	if s.CacheUses() != u {
		t.Fatal("DropCaches counted as a use")
	}
	for i, id := range ids {
		if got := mustGet(t, s, id); string(got) != string(texts[i]) {
			t.Fatalf("revision %d read wrong after DropCaches", i)
		}
	}
	if s.CacheUses() == u {
		t.Fatal("reads did not count as cache uses")
	}
	// A put after the drop deltas against a rebuilt parent.
	e := mustPut(t, s, PutRequest{File: f, Data: text, P1: prev})
	if got := mustGet(t, s, e.ID()); string(got) != string(text) {
		t.Fatal("put after DropCaches read back wrong")
	}
	verifyClean(t, s)
}
