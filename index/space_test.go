package index

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
)

func TestReserve(t *testing.T) {
	for _, c := range []struct {
		total     int64
		put       bool
		want      int64
		situation string
	}{
		{1 << 40, false, writeFree, "a big disk: 32 MiB"},
		{1 << 40, true, writeFree * 3 / 2, "a put wants half as much again"},
		{160 << 20, false, 10 << 20, "a small one: a 16th"},
		{8 << 20, false, 1 << 20, "at least a MiB"},
	} {
		if got := reserve(c.total, c.put); got != c.want {
			t.Errorf("%s: reserve(%d, %v) = %d, want %d", c.situation, c.total, c.put, got, c.want)
		}
	}
}

// TestWriteOnFullDisk: an index on a small filesystem keeps its current
// logs allocated; once the filesystem is full, a write is refused with
// ENOSPC (ErrRefused for a Commit) and leaves nothing; once space is
// freed, writes go on and the index closes and reopens whole.
func TestWriteOnFullDisk(t *testing.T) {
	fsdir := testutil.LoopFS(t, 96<<20)
	dir := filepath.Join(fsdir, "index")
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetFormat(1); err != nil {
		t.Fatal(err)
	}
	allocated := func(name string) bool {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Blocks*512 >= fi.Size()
	}
	mem, vlog := currentLogs(dir)
	if !allocated(memName(mem)) {
		t.Errorf("%s not allocated", memName(mem))
	}
	if allocated(vlogName(vlog)) {
		t.Errorf("%s allocated with no value for it", vlogName(vlog))
	}
	tb, th, err := bigTree(30000).Encode()
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(fsdir, "filler")
	fill(t, filler)
	b := &Batch{Entries: []Entry{{File: 1, Rev: 0, Size: 3, Kind: KindFull, Seg: 1}}, Files: map[FileID]FileMeta{1: {Name: "f", Revs: 1}}, Tail: Tail{Seg: 1, End: 100}}
	err = db.Commit(b)
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrRefused) {
		t.Fatalf("commit on a full disk: %v, want ENOSPC and ErrRefused", err)
	}
	if _, err := db.NewFile("g"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("new file on a full disk: %v, want ENOSPC", err)
	}
	if tail, err := db.Tail(); err != nil || tail != (Tail{}) {
		t.Fatalf("tail after a refused commit: %v, %v", tail, err)
	}
	if err := db.PutTrees(map[TreeHash][]byte{th: tb}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a big tree on a full disk: %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := db.Commit(b); err != nil {
		t.Fatalf("commit with room: %v", err)
	}
	if err := db.PutTrees(map[TreeHash][]byte{th: tb}); err != nil {
		t.Fatalf("a big tree with room: %v", err)
	}
	if _, vlog := currentLogs(dir); !allocated(vlogName(vlog)) {
		t.Errorf("%s not allocated for a %d-byte value", vlogName(vlog), len(tb))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if e, err := db.Entry(RevID{File: 1, Rev: 0}); err != nil || e.Size != 3 {
		t.Fatalf("entry after reopening: %+v, %v", e, err)
	}
}

// fill writes p until the filesystem is full.
func fill(t *testing.T, p string) {
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); errors.Is(err, syscall.ENOSPC) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRoomAsksAgainWhenTight: on a file system with little spare room
// Room trusts no statfs, so a put right after one that passed is refused
// once the disk is full, and allowed again once it is freed.
func TestRoomAsksAgainWhenTight(t *testing.T) {
	fsdir := testutil.LoopFS(t, 96<<20)
	db, err := Open(filepath.Join(fsdir, "index"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Room(); err != nil {
		t.Fatalf("room on an empty file system: %v", err)
	}
	if until := db.roomUntil.Load(); until != 0 {
		t.Fatalf("Room on a 96 MiB file system trusts its statfs until %d, want never", until)
	}
	filler := filepath.Join(fsdir, "filler")
	fill(t, filler)
	if err := db.Room(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("room at once after the disk filled: %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := db.Room(); err != nil {
		t.Fatalf("room once the filler is gone: %v", err)
	}
}

// TestRoomTrustsAGiBSpare: with a GiB or more to spare (a 2 GiB loop
// file system), Room answers from its last statfs for roomFor, and asks
// again after: while trusted it does not see that its directory is gone;
// roomFor later it does.
func TestRoomTrustsAGiBSpare(t *testing.T) {
	dir := testutil.LoopFS(t, 2<<30)
	free, total, err := freeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if free < reserve(total, true)+roomSlack {
		t.Fatalf("a 2 GiB file system has %d bytes free, less than a GiB to spare", free)
	}
	db, err := Open(filepath.Join(dir, "index"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Room(); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	live := db.dir
	db.dir = filepath.Join(dir, "missing")
	defer func() { db.dir = live }()
	if err := db.Room(); err != nil && time.Since(asked) < roomFor {
		t.Fatalf("Room within %v of a statfs that found %d bytes free asked again: %v", roomFor, free, err)
	}
	time.Sleep(roomFor + 10*time.Millisecond)
	if err := db.Room(); err == nil {
		t.Fatalf("Room %v after its last statfs did not ask again (its directory is gone)", roomFor)
	}
	if until := db.roomUntil.Load(); until != 0 {
		t.Fatalf("a failed statfs left Room trusting until %d", until)
	}
}

// BenchmarkBeginWrite is the cost the space checks add to every write
// transaction (two lstats and a statfs when badger has not moved on to
// new logs), and BenchmarkRoom to every put: a statfs ("asked"), or none
// while one that found a GiB to spare is trusted ("trusted", on a file
// system with that much free).
func BenchmarkBeginWrite(b *testing.B) {
	db, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := db.beginWrite(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRoom(b *testing.B) {
	db, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, trust := range []bool{false, true} {
		name := map[bool]string{false: "asked", true: "trusted"}[trust]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !trust {
					db.roomUntil.Store(0)
				}
				if err := db.Room(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMemtableBytes: Close's room is measured from the entries in the
// memtable logs: none in a fresh index, about what was written after.
func TestMemtableBytes(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := memtableBytes(dir); n != 0 {
		t.Fatalf("a fresh index's memtable logs hold %d bytes of entries", n)
	}
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("a-name-of-32-bytes-number-%06d", i)
	}
	if _, err := db.NewFiles(names); err != nil {
		t.Fatal(err)
	}
	// each entry: its key (f/ and 8 bytes, and badger's 8-byte version),
	// the record holding the name, and a header and a CRC
	if n := memtableBytes(dir); n < 1000*(18+32) || n > 1000*(18+32+64)+4096 {
		t.Fatalf("1000 new files: %d bytes of entries in the memtable logs", n)
	}
}
