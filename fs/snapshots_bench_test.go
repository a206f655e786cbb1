package fs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/deltafs/deltafs/fs"
)

// BenchmarkSnapshotCreate is M4 without FUSE: a snapshot of a tree of n
// files (100 per directory, 10 directories per parent) after 10 files
// changed (their revisions recorded beforehand, as the mount records at
// close). The figure to watch
// is that it does not grow with n; dirs/op is the number of directories
// serialised again.
func BenchmarkSnapshotCreate(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			e := newSnapEnv(b)
			leaves := makeTree(b, e.live, max(n/1000, 1), 10, 100)
			e.mustCreate("base")
			dirs := 0
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				for k := range 10 {
					rel := fmt.Sprintf("%s/f%04d", leaves[(i*10+k)*7%len(leaves)], k)
					writeFile(b, e.live+"/"+rel, fmt.Sprintf("revision %d of %d", i, k))
					e.touchPath(rel)
					// Recorded before the timer starts, as the mount's
					// recorder does at close.
					if _, _, err := e.revs.Revision(context.Background(), fs.FileID{}, e.live+"/"+rel, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				dirs += e.mustCreate(fmt.Sprintf("s%d", i)).Serialised
				i++
			}
			b.ReportMetric(float64(dirs)/float64(i), "dirs/op")
		})
	}
}
