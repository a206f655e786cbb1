package mount

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/deltafs/deltafs/index"
)

// Retention says which snapshots "deltafs snapshot prune" keeps, with
// restic's and borg's semantics: walking the snapshots newest first,
//
//   - Last keeps the Last newest snapshots;
//   - Daily keeps the newest snapshot of each of the Daily most recent
//     days (UTC calendar days) that have snapshots;
//   - Weekly the same for ISO weeks (UTC, weeks start on Monday).
//
// A snapshot any rule keeps is kept; every other one is removed. Days
// and weeks without snapshots do not count: --keep-daily 7 on a store
// snapshotted every other day keeps two weeks' worth.
type Retention struct {
	Last, Daily, Weekly int
}

// IsZero reports whether r keeps nothing (prune refuses that).
func (r Retention) IsZero() bool { return r.Last <= 0 && r.Daily <= 0 && r.Weekly <= 0 }

// PruneDecision is the fate of one snapshot.
type PruneDecision struct {
	Snapshot index.Snapshot
	Keep     bool
	Reasons  []string // the rules that keep it: "last", "daily", "weekly"
}

// PlanPrune decides the fate of every snapshot in list under r, newest
// first.
func PlanPrune(list []index.Snapshot, r Retention) []PruneDecision {
	snaps := slices.Clone(list)
	slices.SortFunc(snaps, func(a, b index.Snapshot) int {
		return cmp.Or(cmp.Compare(b.Time, a.Time), cmp.Compare(b.ID, a.ID))
	})
	rules := []struct {
		name string
		left int
		key  func(t time.Time) string
		last string
	}{
		{name: "last", left: r.Last}, // each snapshot its own bucket
		{name: "daily", left: r.Daily, key: func(t time.Time) string { return t.Format(time.DateOnly) }},
		{name: "weekly", left: r.Weekly, key: func(t time.Time) string {
			y, w := t.ISOWeek()
			return fmt.Sprintf("%d-W%02d", y, w)
		}},
	}
	out := make([]PruneDecision, len(snaps))
	for i, s := range snaps {
		out[i].Snapshot = s
		t := time.Unix(0, s.Time).UTC()
		for j := range rules {
			rule := &rules[j]
			if rule.left <= 0 {
				continue
			}
			k := fmt.Sprint(i)
			if rule.key != nil {
				k = rule.key(t)
			}
			if i > 0 && k == rule.last {
				continue // an older snapshot of a bucket already kept
			}
			rule.last = k
			rule.left--
			out[i].Keep = true
			out[i].Reasons = append(out[i].Reasons, rule.name)
		}
	}
	return out
}
