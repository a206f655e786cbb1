package mount

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
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
		{Rev: 5, Time: t0, Size: 900, Base: "p1+p2", Chain: 4, Stored: 60, BaseRev: &RevRef{File: 7, Rev: 3},
			Base2Rev: &RevRef{File: 7, Rev: 4}, P1: &RevRef{File: 7, Rev: 4}, P2: &RevRef{File: 7, Rev: 3}, Flags: []string{"delta"}},
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

// TestAddRevMatchesAdd checks that the allocation-free row encoder writes
// the bytes add writes for the same revision as a RevInfo.
func TestAddRevMatchesAdd(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 23, 15, 2, 123456789, time.UTC)
	list := []index.Snapshot{{ID: 1, Name: "before"}, {ID: 4, Name: "auto-1"}}
	revs := []objstore.Revision{
		{Rev: 0, Time: t0, Size: 3 << 20, Kind: index.KindFull, Stored: 4000, Flags: index.FlagZstd},
		{Rev: 1, Time: t0.Add(-time.Hour), Kind: index.KindP1, ChainLen: 1, Stored: 12, Base: index.RevID{File: 7, Rev: 0},
			P1: index.RevID{File: 7, Rev: 0}, Flags: index.FlagZstd | index.FlagDelta | index.FlagHashDeferred},
		{Rev: 9, Time: t0.Add(time.Hour), Size: 1 << 40, Kind: index.KindDedup, ChainLen: 9, Base: index.RevID{File: 1 << 60, Rev: 3},
			P1: index.RevID{File: 7, Rev: 1}, P2: index.RevID{File: 7, Rev: 0}},
		{Rev: 10, Time: t0, Size: 900, Kind: index.KindP1P2, ChainLen: 4, Stored: 60, Base: index.RevID{File: 7, Rev: 3},
			Base2: index.RevID{File: 7, Rev: 9}, P1: index.RevID{File: 7, Rev: 9}, P2: index.RevID{File: 7, Rev: 3}, Flags: index.FlagDelta},
	}
	held := [][]heldPair{{{0, 0}, {0, 1}}, nil, {{9, 1}}, nil}
	a, b := newRowWriter(nil), newRowWriter(nil)
	for i, r := range revs {
		info := infoOfRev(r)
		for _, p := range held[i] {
			info.Snapshots = append(info.Snapshots, list[p.snap].Name)
		}
		a.add(info)
		b.addRev(r, held[i], list)
	}
	if !bytes.Equal(a.bytes(), b.bytes()) {
		t.Fatalf("addRev wrote\n%x\nadd wrote\n%x", b.bytes(), a.bytes())
	}
}
