package mount

import (
	"cmp"
	"slices"

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
// clipped to size. Both are sorted already as fs.Change promises (a held
// change's union, a session's rangeSet), so they are merged in one pass:
// fsync calls this on its request path, with a held change that grows
// for the whole fsync interval, and sorting the concatenation each time
// cost ~2 ms per fsync late in a second of M2's 4 KiB writes with an
// fsync every 100 (BenchmarkMergeFsyncInterval). A list out of order is
// sorted first.
func unionRanges(a, b []fs.Range, size int64) []fs.Range {
	a, b = sortedRanges(a), sortedRanges(b)
	var out []fs.Range
	if len(a)+len(b) > 0 {
		out = make([]fs.Range, 0, len(a)+len(b))
	}
	for len(a) > 0 || len(b) > 0 {
		var r fs.Range
		if len(b) == 0 || len(a) > 0 && a[0].Off <= b[0].Off {
			r, a = a[0], a[1:]
		} else {
			r, b = b[0], b[1:]
		}
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
	if len(out) == 0 {
		return nil
	}
	return out
}

// sortedRanges returns rs if it is sorted by offset, else a sorted copy.
func sortedRanges(rs []fs.Range) []fs.Range {
	if slices.IsSortedFunc(rs, byOff) {
		return rs
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, byOff)
	return rs
}

func byOff(x, y fs.Range) int { return cmp.Compare(x.Off, y.Off) }
