package objstore

import (
	"context"
	"math/bits"

	"github.com/deltafs/deltafs/index"
)

// Stats summarises a store.
type Stats struct {
	Revisions    int64            `json:"revisions"`
	Files        int64            `json:"files"`
	LogicalBytes uint64           `json:"logical_bytes"` // sum of fulltext lengths
	StoredBytes  uint64           `json:"stored_bytes"`  // sum of record lengths
	SegmentBytes uint64           `json:"segment_bytes"` // committed segment data on disk
	ChainMax     uint32           `json:"chain_max"`
	ChainMean    float64          `json:"chain_mean"`
	ChainReadMax float64          `json:"chain_read_max_ratio"` // max ChainBytes/Size
	ChainHist    []ChainBucket    `json:"chain_histogram"`
	ByKind       map[string]int64 `json:"by_kind"`
	CacheBytes   int64            `json:"cache_bytes"`
	CacheEntries int              `json:"cache_entries"`
	Puts         int64            `json:"puts"`          // since Open
	Commits      int64            `json:"commits"`       // group commits (fsyncs) since Open
	RecordsRead  int64            `json:"records_read"`  // since Open, by reads, puts and Verify
	BytesRead    int64            `json:"bytes_read"`    // stored bytes of those records
	HashedBytes  int64            `json:"hashed_bytes"`  // since Open, fulltext bytes hashed by puts and reads
	RebuiltBytes int64            `json:"rebuilt_bytes"` // since Open, fulltext bytes rebuilt whole in memory (not from a cache)
}

// ChainBucket counts revisions with chain length in [Min, Max].
type ChainBucket struct {
	Min   uint32 `json:"min"`
	Max   uint32 `json:"max"`
	Count int64  `json:"count"`
}

// Stats walks the index. It does not read segment data.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ByKind: map[string]int64{}}
	var hist [33]int64 // bucket 0: length 0; bucket k: [2^(k-1), 2^k)
	var chainSum uint64
	err := s.idx.All(ctx, func(e index.Entry) error {
		st.Revisions++
		st.LogicalBytes += e.Size
		st.StoredBytes += uint64(e.Stored)
		if e.Lost() {
			st.ByKind["lost"]++ // kept by a salvage: no record
		} else {
			st.ByKind[e.Kind.String()]++
		}
		st.ChainMax = max(st.ChainMax, e.ChainLen)
		chainSum += uint64(e.ChainLen)
		hist[bits.Len32(e.ChainLen)]++
		if e.Size > 0 {
			st.ChainReadMax = max(st.ChainReadMax, float64(e.ChainBytes)/float64(e.Size))
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	if st.Revisions > 0 {
		st.ChainMean = float64(chainSum) / float64(st.Revisions)
	}
	for k, n := range hist {
		if n > 0 {
			st.ChainHist = append(st.ChainHist, bucket(k, n))
		}
	}
	err = s.idx.Files(ctx, func(index.FileID, index.FileMeta) error { st.Files++; return nil })
	if err != nil {
		return st, err
	}
	tail, err := s.idx.Tail()
	if err != nil {
		return st, err
	}
	st.SegmentBytes = s.segmentBytes(tail)
	st.CacheBytes, st.CacheEntries = s.cache.size()
	st.Puts, st.Commits = s.puts.Load(), s.commits.Load()
	st.RecordsRead, st.BytesRead = s.readRecords.Load(), s.readBytes.Load()
	st.HashedBytes, st.RebuiltBytes = s.hashedBytes.Load(), s.rebuiltBytes.Load()
	return st, nil
}

func bucket(k int, n int64) ChainBucket {
	if k == 0 {
		return ChainBucket{Count: n}
	}
	return ChainBucket{Min: 1 << (k - 1), Max: 1<<k - 1, Count: n}
}

// segmentBytes sums the committed segment sizes.
func (s *Store) segmentBytes(tail index.Tail) uint64 {
	total := tail.End
	for n := uint32(1); n < tail.Seg; n++ {
		if f, err := s.segs.file(n, false); err == nil {
			if st, err := f.Stat(); err == nil {
				total += uint64(st.Size())
			}
		}
	}
	return total
}
