package mount

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/deltafs/deltafs/fs"
)

// BenchmarkMergeFsyncInterval: M2's database pattern, 4 KiB writes at
// random offsets of a 1 GiB file with an fsync every 100, as the
// Recorder sees it within one fsync interval: each fsync's report (100
// ranges) merges with the change held since the interval began. One op
// is one fsync's merge, averaged over an interval of 100 fsyncs (10,000
// writes: a second at 10,000 IOPS), on the file system's request path.
func BenchmarkMergeFsyncInterval(b *testing.B) {
	const size, perFsync, fsyncs = 1 << 30, 100, 100
	r := rand.New(rand.NewPCG(1, 2))
	reports := make([]fs.Change, fsyncs)
	for i := range reports {
		var rs []fs.Range
		for range perFsync {
			rs = append(rs, fs.Range{Off: r.Int64N(size/4096) * 4096, Len: 4096})
		}
		slices.SortFunc(rs, byOff)
		reports[i] = fs.Change{Dirty: unionRanges(nil, rs, size), Size: size, Kept: size, Fsync: true}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var held fs.Change
	for i := range b.N {
		if i%fsyncs == 0 {
			held = reports[0] // the interval's first report: queued, then held from the next
			continue
		}
		held = merge(held, reports[i%fsyncs])
	}
}
