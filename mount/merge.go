package mount

import (
	"sort"

	"github.com/deltafs/deltafs/fs"
)

// merge combines an older change a of a file with the newer b into one
// change against the revision before a: a byte below both Kept values and
// outside both Dirty sets is unchanged since then; every other byte is
// read from the live file. a's Content is closed; b's is kept.
func merge(a, b fs.Change) fs.Change {
	a.Close()
	m := b
	m.Kept = min(a.Kept, b.Kept)
	m.New = a.New || b.New
	m.Whole = a.Whole || b.Whole
	m.Dirty = unionRanges(a.Dirty, b.Dirty, b.Size)
	m.Sources = append(append([]fs.FileRef(nil), a.Sources...), b.Sources...)
	if m.New {
		m.Kept = 0
	}
	return m
}

// unionRanges returns the sorted, coalesced union of two range lists,
// clipped to size.
func unionRanges(a, b []fs.Range, size int64) []fs.Range {
	all := append(append([]fs.Range(nil), a...), b...)
	sort.Slice(all, func(i, j int) bool { return all[i].Off < all[j].Off })
	var out []fs.Range
	for _, r := range all {
		end := min(r.End(), size)
		if end <= r.Off {
			continue
		}
		if n := len(out); n > 0 && r.Off <= out[n-1].End() {
			out[n-1].Len = max(out[n-1].End(), end) - out[n-1].Off
			continue
		}
		out = append(out, fs.Range{Off: r.Off, Len: end - r.Off})
	}
	return out
}
