package fs

import (
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

func TestRangeSetCoalesces(t *testing.T) {
	var s rangeSet
	s.add(10, 5)  // [10,15)
	s.add(0, 5)   // [0,5)
	s.add(5, 5)   // touches both: [0,15)
	s.add(20, 10) // [20,30)
	s.add(40, 1)
	s.add(25, 20) // [20,45)
	want := []Range{{0, 15}, {20, 25}}
	if got := s.ranges(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranges %v, want %v", got, want)
	}
	s.clip(22)
	if got := s.ranges(); !reflect.DeepEqual(got, []Range{{0, 15}, {20, 2}}) {
		t.Fatalf("after clip: %v", got)
	}
	s.clip(20)
	if got := s.ranges(); !reflect.DeepEqual(got, []Range{{0, 15}}) {
		t.Fatalf("after clip to a gap: %v", got)
	}
}

// TestRangeSetModel checks the set against a bitmap of written bytes.
func TestRangeSetModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const size = 200
		var s rangeSet
		var model [size]bool
		for i := rapid.IntRange(0, 30).Draw(t, "ops"); i > 0; i-- {
			off := rapid.Int64Range(0, size-1).Draw(t, "off")
			n := rapid.Int64Range(0, size-off).Draw(t, "n")
			if rapid.IntRange(0, 9).Draw(t, "clip") == 0 {
				s.clip(off)
				for j := off; j < size; j++ {
					model[j] = false
				}
				continue
			}
			s.add(off, n)
			for j := off; j < off+n; j++ {
				model[j] = true
			}
		}
		var got [size]bool
		prevEnd := int64(-1)
		for _, r := range s.ranges() {
			if r.Len <= 0 || r.Off <= prevEnd {
				t.Fatalf("ranges not sorted, disjoint and apart: %v", s.ranges())
			}
			prevEnd = r.End()
			for j := r.Off; j < r.End(); j++ {
				got[j] = true
			}
		}
		if got != model {
			t.Fatalf("set %v differs from the model", s.ranges())
		}
	})
}
