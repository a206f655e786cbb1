package mount

import (
	"context"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// Stats summarises a store for "deltafs stats": what scripts and
// benchmarks read. The JSON names are stable.
type Stats struct {
	Files        int64                  `json:"files"`
	Revisions    int64                  `json:"revisions"`
	Snapshots    int64                  `json:"snapshots"`
	LogicalBytes uint64                 `json:"logical_bytes"` // sum of revision sizes
	StoredBytes  uint64                 `json:"stored_bytes"`  // sum of stored record sizes
	SegmentBytes uint64                 `json:"segment_bytes"` // segment data on disk
	MaxChain     uint32                 `json:"max_chain"`
	MeanChain    float64                `json:"mean_chain"`
	ChainHist    []objstore.ChainBucket `json:"chain_histogram"`
	ByKind       map[string]int64       `json:"by_kind"`
	Mounted      bool                   `json:"mounted"` // answered by a running mount
	// InterruptedRepack is the bytes a killed repack left in STORE/repack.
	InterruptedRepack int64 `json:"interrupted_repack_bytes"`
	// Damage is the damage recorded in the store (objstore.Store.Damage:
	// a segment found cut short), if any.
	Damage string `json:"damage,omitempty"`
}

// StoreStats gathers Stats from an open store (it walks the index, not
// the segment data).
func StoreStats(ctx context.Context, st *objstore.Store) (Stats, error) {
	s, err := st.Stats(ctx)
	if err != nil {
		return Stats{}, err
	}
	var snaps int64
	if err := st.Snapshots(ctx, func(index.Snapshot) error { snaps++; return nil }); err != nil {
		return Stats{}, err
	}
	left, err := st.InterruptedRepackBytes()
	if err != nil {
		return Stats{}, err
	}
	out := Stats{
		Files: s.Files, Revisions: s.Revisions, Snapshots: snaps,
		LogicalBytes: s.LogicalBytes, StoredBytes: s.StoredBytes, SegmentBytes: s.SegmentBytes,
		MaxChain: s.ChainMax, MeanChain: s.ChainMean, ChainHist: s.ChainHist, ByKind: s.ByKind,
		InterruptedRepack: left,
	}
	if d := st.Damage(); d != nil {
		out.Damage = d.Error()
	}
	return out, nil
}
