package index

import (
	"errors"
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
