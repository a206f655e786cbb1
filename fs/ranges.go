package fs

import "sort"

// rangeSet is a coalesced set of byte ranges: sorted, disjoint and never
// adjacent. Writes usually extend the last range (sequential writes) or
// land near one another, so an insertion is a binary search plus a short
// merge.
type rangeSet struct {
	r []Range
}

// add inserts [off, off+n).
func (s *rangeSet) add(off, n int64) {
	if n <= 0 {
		return
	}
	end := off + n
	// first range whose end reaches off (touching counts: coalesce)
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].End() >= off })
	j := i
	for j < len(s.r) && s.r[j].Off <= end {
		off = min(off, s.r[j].Off)
		end = max(end, s.r[j].End())
		j++
	}
	merged := Range{Off: off, Len: end - off}
	if i == j {
		s.r = append(s.r, Range{})
		copy(s.r[i+1:], s.r[i:])
		s.r[i] = merged
		return
	}
	s.r[i] = merged
	s.r = append(s.r[:i+1], s.r[j:]...)
}

// clip drops everything at or after size.
func (s *rangeSet) clip(size int64) {
	i := sort.Search(len(s.r), func(i int) bool { return s.r[i].End() > size })
	if i < len(s.r) && s.r[i].Off < size {
		s.r[i].Len = size - s.r[i].Off
		i++
	}
	s.r = s.r[:i]
}

// ranges returns a copy of the set.
func (s *rangeSet) ranges() []Range {
	return append([]Range(nil), s.r...)
}

// bytes returns the total length of the set.
func (s *rangeSet) bytes() int64 {
	var n int64
	for _, r := range s.r {
		n += r.Len
	}
	return n
}
