package index

import (
	"errors"
	"fmt"
	"testing"
)

func sampleEntry() Entry {
	return Entry{
		File: 7, Rev: 12,
		P1: RevID{7, 11}, P2: RevID{3, 2}, Base: RevID{3, 2},
		Kind: KindP2, ChainLen: 4, ChainBytes: 1 << 20, Size: 8 << 20,
		Stored: 345, Hash: 0xdeadbeefcafef00d, Seg: 3, Off: 1 << 33,
		Flags: FlagZstd | FlagDelta, Time: 1_700_000_000_000_000_000,
	}
}

func TestEntryRoundTrip(t *testing.T) {
	cases := []Entry{
		sampleEntry(),
		{File: 1, Kind: KindFull},
		{File: 1<<64 - 1, Rev: 1<<32 - 1, Base: RevID{1, 0}, Kind: KindDedup, Time: -5},
		twoBaseEntry(),
	}
	for _, e := range cases {
		b, err := e.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Entry
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", e, err)
		}
		if got != e {
			t.Fatalf("round trip: got %+v want %+v", got, e)
		}
	}
}

func twoBaseEntry() Entry {
	e := sampleEntry()
	e.P2, e.Base, e.Base2, e.Kind = RevID{7, 9}, RevID{7, 9}, RevID{7, 11}, KindP1P2
	return e
}

// TestEntryVersions: an entry without a second base is written as
// version 1, byte for byte as before Base2 existed (the bytes below are
// what the build before it wrote for sampleEntry), and one with a second
// base as version 2, which a build before it refuses (version byte).
func TestEntryVersions(t *testing.T) {
	e := sampleEntry()
	b, _ := e.MarshalBinary()
	const old = "01070c070b03020302030480804080808004d902deadbeefcafef00d038080808020038080d0e2c6bfce972f"
	if got := fmt.Sprintf("%x", b); got != old {
		t.Fatalf("version 1 encoding changed:\n got %s\nwant %s", got, old)
	}
	two := twoBaseEntry()
	b2, _ := two.MarshalBinary()
	if b2[0] != entryVersion2 || len(b2) != len(b)+2 {
		t.Fatalf("two-base entry: version %d, %d bytes against %d", b2[0], len(b2), len(b))
	}
}

func TestEntryDecodeRejects(t *testing.T) {
	e := sampleEntry()
	good, _ := e.MarshalBinary()
	bad := map[string][]byte{
		"empty":    nil,
		"version":  append([]byte{9}, good[1:]...),
		"trailing": append(append([]byte{}, good...), 0),
		"short":    good[:len(good)-3],
	}
	full := Entry{File: 1, Kind: KindFull, Base: RevID{1, 0}}
	bad["full with base"], _ = full.MarshalBinary()
	noFile := Entry{Kind: KindFull}
	bad["file 0"], _ = noFile.MarshalBinary()
	two := twoBaseEntry()
	b2, _ := two.MarshalBinary()
	bad["version 2 with a null second base"] = append([]byte{entryVersion2}, good[1:]...)
	for name, mod := range map[string]func(e *Entry){
		"second base, kind p2":       func(e *Entry) { e.Kind = KindP2 },
		"kind p1+p2, no second base": func(e *Entry) { e.Base2 = NullRev },
		"same base twice":            func(e *Entry) { e.Base2 = e.Base },
		"p1+p2 without delta flag":   func(e *Entry) { e.Flags = FlagZstd },
		"p1+p2 as a fulltext":        func(e *Entry) { e.Base = NullRev },
	} {
		x := twoBaseEntry()
		mod(&x)
		bad[name], _ = x.MarshalBinary()
	}
	bad["version 2 truncated"] = b2[:len(b2)-1]
	bad["version 1 of a two-base entry"] = append([]byte{entryVersion}, b2[1:]...)
	for name, b := range bad {
		var got Entry
		if err := got.UnmarshalBinary(b); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: got %v, want ErrDecode", name, err)
		}
	}
}

func FuzzEntryDecode(f *testing.F) {
	e := sampleEntry()
	b, _ := e.MarshalBinary()
	f.Add(b)
	f.Add([]byte{1})
	f.Add([]byte{})
	two := twoBaseEntry()
	b2, _ := two.MarshalBinary()
	f.Add(b2)
	f.Add(b2[:len(b2)-4])
	f.Add(append([]byte{entryVersion2}, b[1:]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Entry
		if err := e.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error not ErrDecode: %v", err)
			}
			return
		}
		again, _ := e.MarshalBinary()
		var e2 Entry
		if err := e2.UnmarshalBinary(again); err != nil || e2 != e {
			t.Fatalf("re-encode mismatch: %v %+v %+v", err, e, e2)
		}
	})
}

func FuzzFileMetaDecode(f *testing.F) {
	m := FileMeta{Name: "a/b.txt", Revs: 9, LastSnap: 4, HasSnap: true}
	b, _ := m.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m FileMeta
		if err := m.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error not ErrDecode: %v", err)
			}
			return
		}
		again, _ := m.MarshalBinary()
		var m2 FileMeta
		if err := m2.UnmarshalBinary(again); err != nil || m2 != m {
			t.Fatalf("re-encode mismatch: %v %+v %+v", err, m, m2)
		}
	})
}

// TestLostEntry: an entry a salvage kept as lost round-trips, holds no
// hash row, and one that claims a record too does not decode.
func TestLostEntry(t *testing.T) {
	e := Entry{File: 3, Rev: 2, P1: RevID{File: 3, Rev: 1}, Kind: KindFull, Size: 100, Hash: 7, Flags: FlagLost, Time: 5}
	b, _ := e.MarshalBinary()
	var got Entry
	if err := got.UnmarshalBinary(b); err != nil || got != e || !got.Lost() || got.HashIndexed() {
		t.Fatalf("lost entry: %+v, %v", got, err)
	}
	if e.Flags.RecordFlags() != 0 {
		t.Errorf("FlagLost reaches a record's flags: %#x", e.Flags.RecordFlags())
	}
	for _, bad := range []Entry{
		{File: 3, Rev: 2, Kind: KindFull, Stored: 40, Flags: FlagLost},
		{File: 3, Rev: 2, Kind: KindP1, Base: RevID{File: 3, Rev: 1}, Flags: FlagLost | FlagDelta},
		{File: 3, Rev: 2, Kind: KindFull, Flags: FlagLost | FlagZstd},
	} {
		b, _ := bad.MarshalBinary()
		if err := new(Entry).UnmarshalBinary(b); !errors.Is(err, ErrDecode) {
			t.Errorf("%+v decodes: %v", bad, err)
		}
	}
}
