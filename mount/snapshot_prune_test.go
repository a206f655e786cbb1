package mount

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// pruneSnaps makes snapshots named after their UTC times ("2026-11-30T10"
// style) with ids in creation (= time) order.
func pruneSnaps(t *testing.T, times ...string) []index.Snapshot {
	t.Helper()
	var out []index.Snapshot
	for i, s := range times {
		tm, err := time.Parse("2006-01-02T15", s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, index.Snapshot{ID: index.SnapshotID(i + 1), Name: s, Time: tm.UnixNano()})
	}
	return out
}

func TestPlanPrune(t *testing.T) {
	// Two a day on Nov 16-18 and 23-30 (2026-11-16 is a Monday), none
	// on 19-22; one on Dec 1 (Tuesday) at 23h and one on Dec 2 at 00h,
	// an hour apart but on two days.
	var times []string
	for _, d := range []int{16, 17, 18, 23, 24, 25, 26, 27, 28, 29, 30} {
		times = append(times, fmt.Sprintf("2026-11-%02dT08", d), fmt.Sprintf("2026-11-%02dT20", d))
	}
	times = append(times, "2026-12-01T23", "2026-12-02T00")
	for _, tc := range []struct {
		name string
		r    Retention
		keep []string // names kept, newest first, with their reasons
	}{
		{"last 3", Retention{Last: 3}, []string{
			"2026-12-02T00 last", "2026-12-01T23 last", "2026-11-30T20 last"}},
		{"daily 3: the newest of each day, midnight splits days", Retention{Daily: 3}, []string{
			"2026-12-02T00 daily", "2026-12-01T23 daily", "2026-11-30T20 daily"}},
		{"daily 6 skips the days without snapshots", Retention{Daily: 6}, []string{
			"2026-12-02T00 daily", "2026-12-01T23 daily", "2026-11-30T20 daily", "2026-11-29T20 daily",
			"2026-11-28T20 daily", "2026-11-27T20 daily"}},
		{"weekly 3: ISO weeks from Monday, one empty week not counted", Retention{Weekly: 3}, []string{
			"2026-12-02T00 weekly", "2026-11-29T20 weekly", "2026-11-18T20 weekly"}},
		{"rules overlap: a snapshot kept by several says so", Retention{Last: 2, Daily: 2, Weekly: 2}, []string{
			"2026-12-02T00 last,daily,weekly", "2026-12-01T23 last,daily", "2026-11-29T20 weekly"}},
		{"more than there are keeps all days", Retention{Daily: 100}, []string{
			"2026-12-02T00 daily", "2026-12-01T23 daily", "2026-11-30T20 daily", "2026-11-29T20 daily",
			"2026-11-28T20 daily", "2026-11-27T20 daily", "2026-11-26T20 daily", "2026-11-25T20 daily",
			"2026-11-24T20 daily", "2026-11-23T20 daily", "2026-11-18T20 daily", "2026-11-17T20 daily",
			"2026-11-16T20 daily"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Listed in a shuffled order: the plan sorts by time.
			list := pruneSnaps(t, times...)
			slices.Reverse(list[:7])
			plan := PlanPrune(list, tc.r)
			var kept []string
			removed := 0
			for _, d := range plan {
				if d.Keep {
					kept = append(kept, d.Snapshot.Name+" "+strings.Join(d.Reasons, ","))
				} else {
					removed++
					if len(d.Reasons) != 0 {
						t.Errorf("%s removed with reasons %v", d.Snapshot.Name, d.Reasons)
					}
				}
			}
			if !slices.Equal(kept, tc.keep) || removed != len(times)-len(tc.keep) || len(plan) != len(times) {
				t.Errorf("kept %q (%d removed), want %q", kept, removed, tc.keep)
			}
		})
	}
	if !(Retention{}).IsZero() || (Retention{Weekly: 1}).IsZero() {
		t.Error("IsZero")
	}
}
