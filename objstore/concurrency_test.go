package objstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// TestConcurrentReadersAndWriters runs writers on several files (their
// fsyncs must be shared by group commit) while readers read back every
// acknowledged revision.
func TestConcurrentReadersAndWriters(t *testing.T) {
	s, _ := openNew(t, Config{CacheBytes: 256 << 10})
	const writers, revs, readers = 4, 30, 4
	var mu sync.Mutex
	var done []index.RevID
	texts := map[index.RevID][]byte{}
	stop := make(chan struct{})
	var wg, rg sync.WaitGroup
	for w := range writers {
		f := mustNewFile(t, s, fmt.Sprint(w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			text := genText(r, 20_000)
			var prev index.RevID
			for range revs {
				e, err := s.Put(context.Background(), PutRequest{File: f, Data: text, P1: prev})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				done, texts[e.ID()] = append(done, e.ID()), text
				mu.Unlock()
				prev, text = e.ID(), edit(r, text, 2)
			}
		}()
	}
	for i := range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				if len(done) == 0 {
					mu.Unlock()
					continue
				}
				id := done[r.IntN(len(done))]
				want := texts[id]
				mu.Unlock()
				got, err := s.Get(context.Background(), id)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("read %v: %v", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Puts != writers*revs || st.Commits >= st.Puts {
		t.Errorf("%d puts in %d commits: group commit shared no fsync", st.Puts, st.Commits)
	}
	t.Logf("%d puts in %d group commits", st.Puts, st.Commits)
	verifyClean(t, s)
}

func TestCacheBounded(t *testing.T) {
	const budget = 100 << 10
	s, _ := openNew(t, Config{CacheBytes: budget, LatestBytes: 1})
	r := rand.New(rand.NewPCG(13, 14))
	f := mustNewFile(t, s, "c")
	text := genText(r, 30_000)
	var ids []index.RevID
	var prev index.RevID
	for range 20 {
		e := mustPut(t, s, PutRequest{File: f, Data: text, P1: prev})
		prev, text = e.ID(), edit(r, text, 2)
		ids = append(ids, prev)
	}
	for _, id := range ids {
		mustGet(t, s, id)
		if used, _ := s.cache.size(); used > budget {
			t.Fatalf("cache holds %d bytes, budget %d", used, budget)
		}
	}
	if used, n := s.cache.size(); n < 2 || used < budget/2 {
		t.Fatalf("cache barely used: %d bytes in %d entries", used, n)
	}
	// A text larger than the whole budget is not cached at all.
	g := mustNewFile(t, s, "big")
	big := mustPut(t, s, PutRequest{File: g, Data: genText(r, 2*budget)})
	mustGet(t, s, big.ID())
	if _, ok := s.cache.get(big.ID()); ok {
		t.Fatal("text over the budget was cached")
	}
}

func TestCarriedDelta(t *testing.T) {
	s, _ := openNew(t, Config{})
	r := rand.New(rand.NewPCG(15, 16))
	f := mustNewFile(t, s, "carried")
	base := genText(r, 40_000)
	b := mustPut(t, s, PutRequest{File: f, Data: base})
	// Something else becomes the latest snapshot and p1 is null, so only the
	// carried delta can be small.
	other := mustPut(t, s, PutRequest{File: f, Data: genText(r, 40_000)})
	target := edit(r, base, 2)
	d := delta.Encode(base, target)
	e := mustPut(t, s, PutRequest{File: f, Data: target, P1: other.ID(), Delta: d, DeltaBase: b.ID()})
	if e.Kind != index.KindReused || e.Base != b.ID() {
		t.Fatalf("carried delta not reused: %v against %v", e.Kind, e.Base)
	}
	if !bytes.Equal(mustGet(t, s, e.ID()), target) {
		t.Fatal("reused delta reads back wrong")
	}
	// Against p1 itself, a verified carried delta is reused without
	// computing a delta of our own.
	target3 := edit(r, base, 1)
	e3 := mustPut(t, s, PutRequest{File: f, Data: target3, P1: b.ID(), Delta: delta.Encode(base, target3), DeltaBase: b.ID()})
	if e3.Kind != index.KindReused {
		t.Fatalf("carried delta against p1 stored as %v", e3.Kind)
	}
	// A carried delta that does not produce the data is never stored.
	target2 := edit(r, base, 2)
	e2 := mustPut(t, s, PutRequest{File: f, Data: target2, P1: other.ID(), Delta: d, DeltaBase: b.ID()})
	if e2.Kind == index.KindReused {
		t.Fatal("a wrong carried delta was stored")
	}
	if !bytes.Equal(mustGet(t, s, e2.ID()), target2) {
		t.Fatal("revision with rejected carried delta reads back wrong")
	}
	verifyClean(t, s)
}

func TestPutErrors(t *testing.T) {
	s, dir := openNew(t, Config{})
	f := mustNewFile(t, s, "x")
	if _, err := s.Put(context.Background(), PutRequest{File: f + 1, Data: []byte("a")}); err == nil {
		t.Fatal("put to a missing file succeeded")
	}
	if _, err := s.Put(context.Background(), PutRequest{File: f, Data: []byte("a"), P1: index.RevID{File: f, Rev: 5}}); err == nil {
		t.Fatal("put with a missing parent succeeded")
	}
	e := mustPut(t, s, PutRequest{File: f, Data: nil})
	if got := mustGet(t, s, e.ID()); len(got) != 0 {
		t.Fatalf("empty revision reads %q", got)
	}
	if _, err := s.Get(context.Background(), index.RevID{File: f, Rev: 9}); !errorsIsNotFound(err) {
		t.Fatalf("get of a missing revision: %v", err)
	}
	s.Close()
	ro, err := Open(dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Put(context.Background(), PutRequest{File: f, Data: []byte("b")}); !errorsIs(err, ErrReadOnly) {
		t.Fatalf("put on read-only store: %v", err)
	}
	if len(mustGet(t, ro, e.ID())) != 0 {
		t.Fatal("read-only get")
	}
}

// TestNeighbourReadsReuseWork: after one cold read, reading the next
// revision applies one delta, and reading the previous one does not read
// the chain's fulltext again.
func TestNeighbourReadsReuseWork(t *testing.T) {
	s, _ := openNew(t, Config{LatestBytes: 1})
	r := rand.New(rand.NewPCG(17, 18))
	f := mustNewFile(t, s, "n")
	text := genText(r, 50_000)
	var ids []index.RevID
	var prev index.RevID
	for range 10 {
		prev = mustPut(t, s, PutRequest{File: f, Data: text, P1: prev}).ID()
		ids = append(ids, prev)
		text = edit(r, text, 2)
	}
	s.cache.clear()
	reads := func(id index.RevID) (int64, int64) {
		n0, b0 := s.readRecords.Load(), s.readBytes.Load()
		mustGet(t, s, id)
		return s.readRecords.Load() - n0, s.readBytes.Load() - b0
	}
	if n, _ := reads(ids[5]); n != 6 {
		t.Fatalf("cold read of rev 5 read %d records, want its chain of 6", n)
	}
	if n, _ := reads(ids[6]); n != 1 {
		t.Fatalf("read of rev 6 after rev 5 read %d records, want 1", n)
	}
	root, _ := s.Entry(ids[0])
	if n, b := reads(ids[4]); n != 4 || b >= int64(root.Stored) {
		t.Fatalf("read of rev 4 read %d records (%d bytes): the fulltext was read again", n, b)
	}
}

func TestLatestKeepsOneOversizedText(t *testing.T) {
	s, _ := openNew(t, Config{LatestBytes: 1000, CacheBytes: 1000})
	r := rand.New(rand.NewPCG(27, 28))
	f := mustNewFile(t, s, "big")
	text := genText(r, 20_000)
	e := mustPut(t, s, PutRequest{File: f, Data: text})
	n0 := s.readRecords.Load()
	mustPut(t, s, PutRequest{File: f, Data: edit(r, text, 1), P1: e.ID()})
	if n := s.readRecords.Load() - n0; n != 0 {
		t.Fatalf("put of the next revision read %d records: its parent was not kept", n)
	}
	if used, n := s.latest.size(); n != 1 || used <= 1000 {
		t.Fatalf("latest holds %d bytes in %d entries, want the one oversized text", used, n)
	}
}
