package mount

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestLogRowsRoundTrip checks that log rows decode to what was encoded,
// as the --json output shows it (absent and empty lists, null refs,
// times before and after the previous row's), and that every truncation
// and trailing garbage is an error.
func TestLogRowsRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 23, 15, 2, 123456789, time.UTC)
	revs := []RevInfo{
		{Rev: 0, Time: t0, Size: 3 << 20, Base: "full", Stored: 4000, Snapshots: []string{"before", "auto-1"}},
		{Rev: 1, Time: t0.Add(-time.Hour), Size: 0, Base: "p1", Chain: 1, Stored: 12,
			BaseRev: &RevRef{File: 7, Rev: 0}, P1: &RevRef{File: 7, Rev: 0}, Flags: []string{"zstd", "delta"}},
		{Rev: 1<<32 - 1, Time: t0.Add(time.Hour), Size: 1 << 40, Base: "dedup", Chain: 9,
			BaseRev: &RevRef{File: 1 << 60, Rev: 3}, P1: &RevRef{File: 7, Rev: 1}, P2: &RevRef{File: 7, Rev: 0}},
	}
	b := appendRows(nil, revs)
	got, err := readRows(b)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(FileLog{Revisions: revs})
	have, _ := json.Marshal(FileLog{Revisions: got})
	if string(have) != string(want) {
		t.Fatalf("round trip:\n got %s\nwant %s", have, want)
	}
	for i := range b {
		if _, err := readRows(b[:i]); !errors.Is(err, errRows) {
			t.Fatalf("%d of %d bytes: %v, want errRows", i, len(b), err)
		}
	}
	if _, err := readRows(append(b, 0)); !errors.Is(err, errRows) {
		t.Fatalf("trailing byte: %v", err)
	}
	if none, err := readRows(appendRows(nil, nil)); err != nil || none == nil || len(none) != 0 {
		t.Fatalf("no rows: %#v, %v (want an empty list: the JSON says [])", none, err)
	}
}
