package index

import "testing"

// TestLatestSkipsGaps: Latest finds a file's newest stored revision when
// gc removed the ones after it (and those of the next file do not leak
// in), and says a file none of whose revisions is left has none.
func TestLatestSkipsGaps(t *testing.T) {
	db, _ := openTest(t)
	f, err := db.NewFile("a")
	if err != nil {
		t.Fatal(err)
	}
	g, err := db.NewFile("b")
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	for r := range 4 {
		b.Entries = append(b.Entries, Entry{File: f, Rev: Rev(r), Kind: KindFull, Hash: uint64(r + 1), Seg: 1, Stored: 10, Size: uint64(r)})
	}
	b.Entries = append(b.Entries, Entry{File: g, Rev: 0, Kind: KindFull, Hash: 9, Seg: 1, Stored: 10})
	b.Files = map[FileID]FileMeta{f: {Name: "a", Revs: 4}, g: {Name: "b", Revs: 1}}
	if err := db.Commit(&b); err != nil {
		t.Fatal(err)
	}
	check := func(file FileID, wantOK bool, want Rev) {
		t.Helper()
		e, ok, err := db.Latest(file)
		if err != nil || ok != wantOK || (ok && (e.File != file || e.Rev != want)) {
			t.Fatalf("Latest(%d) = %v %v %v, want rev %d ok %v", file, e.ID(), ok, err, want, wantOK)
		}
	}
	check(f, true, 3)
	if err := db.DeleteEntries([]Entry{b.Entries[3], b.Entries[2]}); err != nil {
		t.Fatal(err)
	}
	check(f, true, 1)
	if e, _, _ := db.Latest(f); e.Size != 1 {
		t.Fatalf("entry of the newest revision: %+v", e)
	}
	if err := db.DeleteEntries(b.Entries[:2]); err != nil {
		t.Fatal(err)
	}
	check(f, false, 0)
	check(g, true, 0)
	check(FileID(99), false, 0)
}
