package index

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func openTest(t *testing.T) (*DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dir
}

func TestNewFileConcurrent(t *testing.T) {
	db, _ := openTest(t)
	const n = 40
	ids := make(chan FileID, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := db.NewFile("f")
			if err != nil {
				t.Error(err)
				return
			}
			_ = i
			ids <- id
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[FileID]bool{}
	for id := range ids {
		if id == 0 || seen[id] {
			t.Fatalf("bad or duplicate id %d", id)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Fatalf("got %d ids, want %d", len(seen), n)
	}
}

// TestNewFilesOneTransaction: NewFiles gives consecutive ids after the
// ones allocated so far, records each name, and the counter it stores
// survives a reopen.
func TestNewFilesOneTransaction(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := db.NewFile("a")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"b", "c/d", "e"}
	ids, err := db.NewFiles(names)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id != first+1+FileID(i) {
			t.Fatalf("ids %v after %d, want consecutive", ids, first)
		}
		m, err := db.File(id)
		if err != nil || m.Name != names[i] {
			t.Fatalf("file %d: %+v (%v), want name %q", id, m, err, names[i])
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	next, err := db.NewFile("f")
	if err != nil || next != ids[len(ids)-1]+1 {
		t.Fatalf("after reopen NewFile = %d (%v), want %d", next, err, ids[len(ids)-1]+1)
	}
}

// TestNewFilesTooManyForOneTransaction: more names than one badger
// transaction holds (a snapshot after 20,000 new excluded files) are
// allocated in several, still consecutive, every name recorded.
func TestNewFilesTooManyForOneTransaction(t *testing.T) {
	db, _ := openTest(t)
	const n = 60000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node_modules/pkg%d/%s", i, strings.Repeat("x", 80))
	}
	ids, err := db.NewFiles(names)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("%d ids for %d names", len(ids), n)
	}
	for i, id := range ids {
		if id != ids[0]+FileID(i) {
			t.Fatalf("id %d is %d, want %d: not consecutive", i, id, ids[0]+FileID(i))
		}
	}
	for _, i := range []int{0, 4095, 4096, n / 2, n - 1} {
		if m, err := db.File(ids[i]); err != nil || m.Name != names[i] {
			t.Fatalf("file %d: %+v (%v), want name %q", ids[i], m, err, names[i])
		}
	}
	if next, err := db.NewFile("after"); err != nil || next != ids[n-1]+1 {
		t.Fatalf("NewFile after them = %d (%v), want %d", next, err, ids[n-1]+1)
	}
}

func TestCommitAndScan(t *testing.T) {
	db, dir := openTest(t)
	f, err := db.NewFile("doc.txt")
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	for r := range 5 {
		e := Entry{File: f, Rev: Rev(r), Kind: KindFull, Hash: uint64(100 + r%2), Seg: 1, Off: uint64(r * 10), Stored: 10}
		if r > 0 {
			e.Kind, e.Base, e.P1 = KindP1, RevID{f, Rev(r - 1)}, RevID{f, Rev(r - 1)}
		}
		b.Entries = append(b.Entries, e)
	}
	b.Entries = append(b.Entries, Entry{File: f, Rev: 5, Kind: KindDedup, Base: RevID{f, 0}, Hash: 100})
	b.Files = map[FileID]FileMeta{f: {Name: "doc.txt", Revs: 6, HasSnap: true}}
	b.Tail = Tail{Seg: 1, End: 50}
	if err := db.Commit(&b); err != nil {
		t.Fatal(err)
	}
	var revs []Rev
	if err := db.Revisions(context.Background(), f, func(e Entry) error { revs = append(revs, e.Rev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(revs) != 6 {
		t.Fatalf("revisions %v", revs)
	}
	for i, r := range revs {
		if r != Rev(i) {
			t.Fatalf("out of order: %v", revs)
		}
	}
	ids, err := db.ByHash(100)
	if err != nil {
		t.Fatal(err)
	}
	// revs 0, 2, 4 have hash 100; the dedup rev 5 has no hash key.
	if len(ids) != 3 || ids[0] != (RevID{f, 0}) || ids[2] != (RevID{f, 4}) {
		t.Fatalf("ByHash = %v", ids)
	}
	if _, err := db.Entry(RevID{f, 9}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing entry: %v", err)
	}
	db.Close()

	// Everything survives a reopen.
	db2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	tail, err := db2.Tail()
	if err != nil || tail != b.Tail {
		t.Fatalf("tail %v %v", tail, err)
	}
	m, err := db2.File(f)
	if err != nil || m.Revs != 6 || m.Name != "doc.txt" {
		t.Fatalf("file meta %+v %v", m, err)
	}
	e, err := db2.Entry(RevID{f, 3})
	if err != nil || e != b.Entries[3] {
		t.Fatalf("entry %+v %v", e, err)
	}
	if err := db2.SetFormat(1); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := db2.Format(); v != 1 || !ok || err != nil {
		t.Fatalf("format %d %v %v", v, ok, err)
	}
}

// TestOpenAfterKillDuringMemtableCreate: a process killed between creating
// a memtable or value log and sizing it leaves an empty file; Open still
// works.
func TestOpenAfterKillDuringMemtableCreate(t *testing.T) {
	db, dir := openTest(t)
	f, err := db.NewFile("x")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, name := range []string{"00009.mem", "000009.vlog"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open with an empty memtable log: %v", err)
	}
	defer db2.Close()
	if m, err := db2.File(f); err != nil || m.Name != "x" {
		t.Fatalf("file record lost: %+v %v", m, err)
	}
}

// A batch bigger than one badger transaction commits whole (in several),
// and every entry, hash key, file record and the tail read back.
func TestCommitBigBatch(t *testing.T) {
	db, dir := openTest(t)
	f, err := db.NewFile("big")
	if err != nil {
		t.Fatal(err)
	}
	const n = 30000
	b := Batch{Files: map[FileID]FileMeta{f: {Name: "big", Revs: n}}, Tail: Tail{Seg: 3, End: 10 * n}}
	for r := range n {
		e := Entry{File: f, Rev: Rev(r), Kind: KindFull, Hash: uint64(1000 + r), Seg: 3, Off: uint64(r * 10), Stored: 10}
		if r > 0 {
			e.Kind, e.Base, e.P1 = KindP1, RevID{f, Rev(r - 1)}, RevID{f, Rev(r - 1)}
		}
		b.Entries = append(b.Entries, e)
	}
	if err := db.Commit(&b); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got int
	if err := db.Revisions(context.Background(), f, func(e Entry) error {
		if e.Rev != Rev(got) || e.Off != uint64(got*10) {
			t.Fatalf("entry %d: %+v", got, e)
		}
		got++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("%d entries read back, want %d", got, n)
	}
	for _, r := range []int{0, n / 2, n - 1} {
		ids, err := db.ByHash(uint64(1000 + r))
		if err != nil || len(ids) != 1 || ids[0] != (RevID{f, Rev(r)}) {
			t.Fatalf("ByHash(rev %d) = %v, %v", r, ids, err)
		}
	}
	m, err := db.File(f)
	if err != nil || m.Revs != n {
		t.Fatalf("file record %+v, %v", m, err)
	}
	if tail, err := db.Tail(); err != nil || tail != b.Tail {
		t.Fatalf("tail %+v, %v; want %+v", tail, err, b.Tail)
	}
}
