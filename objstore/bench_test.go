package objstore

import (
	"context"
	"math/rand/v2"
	"testing"

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
	texts := make([][]byte, 64) // prepared outside the timer
	for i := range texts {
		text = edit(r, text, 3)
		texts[i] = text
	}
	b.SetBytes(benchSize)
	b.ReportAllocs()
	b.ResetTimer()
	var stored uint64
	for i := range b.N {
		e := mustPut(b, s, PutRequest{File: f, Data: texts[i%len(texts)], P1: prev})
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
