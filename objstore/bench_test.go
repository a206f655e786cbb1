package objstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

const benchSize = 8 << 20

// BenchmarkPutSmallEdits: each op is a revision of an 8 MiB text-like file
// with a few small line edits of the previous one (S1's shape).
func BenchmarkPutSmallEdits(b *testing.B) {
	s, _ := openNew(b, Config{})
	r := rand.New(rand.NewPCG(21, 22))
	f := mustNewFile(b, s, "big")
	text := genText(r, benchSize)
	prev := mustPut(b, s, PutRequest{File: f, Data: text}).ID()
	b.SetBytes(benchSize)
	b.ReportAllocs()
	b.ResetTimer()
	var stored uint64
	for range b.N {
		b.StopTimer()
		text = edit(r, text, 3) // every revision new: no dedup
		b.StartTimer()
		e := mustPut(b, s, PutRequest{File: f, Data: text, P1: prev})
		prev, stored = e.ID(), stored+uint64(e.Stored)
	}
	b.ReportMetric(float64(stored)/float64(b.N), "stored-B/rev")
}

// benchHistory writes n revisions of an 8 MiB file and returns their ids.
func benchHistory(b *testing.B, s *Store, n int) []index.RevID {
	r := rand.New(rand.NewPCG(23, 24))
	f := mustNewFile(b, s, "hist")
	text := genText(r, benchSize)
	var ids []index.RevID
	var prev index.RevID
	for range n {
		prev = mustPut(b, s, PutRequest{File: f, Data: text, P1: prev}).ID()
		ids = append(ids, prev)
		text = edit(r, text, 3)
	}
	return ids
}

func benchGet(b *testing.B, pick func(ids []index.RevID) index.RevID) {
	s, _ := openNew(b, Config{})
	ids := benchHistory(b, s, 200)
	id := pick(ids)
	e, _ := s.Entry(id)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.cache.clear() // measure a cold rebuild of the chain
		s.latest.clear()
		if _, err := s.Get(context.Background(), id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.ChainLen), "chain-len")
	b.ReportMetric(float64(e.ChainBytes), "chain-B")
}

func BenchmarkGetNewest(b *testing.B) {
	benchGet(b, func(ids []index.RevID) index.RevID { return ids[len(ids)-1] })
}

func BenchmarkGetOldest(b *testing.B) {
	benchGet(b, func(ids []index.RevID) index.RevID { return ids[0] })
}

// BenchmarkChainCaps reproduces the table next to DefaultMaxChainLen: 600
// revisions of an 8 MiB file under each cap, then cold reads of every 7th
// revision. Run with -benchtime 1x; it reports size and read percentiles.
func BenchmarkChainCaps(b *testing.B) {
	for _, c := range []uint32{50, 128, 1000} {
		b.Run(fmt.Sprintf("cap=%d", c), func(b *testing.B) {
			s, _ := openNew(b, Config{MaxChainLen: c})
			ids := benchHistory(b, s, 600)
			st, err := s.Stats(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var lat []time.Duration
			for range b.N {
				lat = lat[:0]
				for i := 0; i < len(ids); i += 7 {
					s.cache.clear()
					s.latest.clear()
					t0 := time.Now()
					if _, err := s.Get(context.Background(), ids[i]); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(st.StoredBytes), "stored-B")
			b.ReportMetric(st.ChainMean, "chain-mean")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// mergeHistory writes S2's shape: two lines of a 200 KiB file diverge by
// small edits and merge about 30% of the time, the merged content being the
// other line's text plus a small edit (closer to p2).
func mergeHistory(b testing.TB, s *Store, revs int) {
	r := rand.New(rand.NewPCG(25, 26))
	f := mustNewFile(b, s, "merge")
	root := genText(r, 200<<10)
	e := mustPut(b, s, PutRequest{File: f, Data: root})
	heads := [2]index.RevID{e.ID(), e.ID()}
	texts := [2][]byte{root, root}
	for range revs {
		l := r.IntN(2)
		req := PutRequest{File: f, P1: heads[l]}
		if r.IntN(10) < 3 && heads[0] != heads[1] {
			req.P2, req.Data = heads[1-l], edit(r, texts[1-l], 1)
		} else {
			req.Data = edit(r, texts[l], 1+r.IntN(20))
		}
		heads[l], texts[l] = mustPut(b, s, req).ID(), req.Data
	}
}

// BenchmarkMergeHistory compares best-of-parents with p1-only on S2's
// shape. Run with -benchtime 1x; it reports the stored bytes of each.
func BenchmarkMergeHistory(b *testing.B) {
	for _, p1only := range []bool{false, true} {
		b.Run(fmt.Sprintf("p1only=%v", p1only), func(b *testing.B) {
			var st Stats
			for range b.N {
				s, _ := openNew(b, Config{P1Only: p1only})
				mergeHistory(b, s, 400)
				var err error
				if st, err = s.Stats(context.Background()); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			b.ReportMetric(float64(st.StoredBytes), "stored-B")
			b.ReportMetric(float64(st.ByKind["p2"]), "p2-deltas")
		})
	}
}
