package index

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// benchIndex writes an index of 100k entries (1000 files of 100
// revisions) in dir and closes it (so settled into tables).
func benchIndex(dir string) error {
	db, err := Open(dir, Options{})
	if err != nil {
		return err
	}
	var off uint64
	for f := FileID(1); f <= 1000; f++ {
		b := Batch{Files: map[FileID]FileMeta{f: {Name: "dir/file", Revs: 100}}}
		for r := Rev(0); r < 100; r++ {
			e := Entry{File: f, Rev: r, Size: 4096, Stored: 300, Hash: uint64(f)<<32 | uint64(r), Off: off, Kind: KindFull}
			if r > 0 {
				e.P1, e.Base, e.Kind, e.ChainLen = RevID{File: f, Rev: r - 1}, RevID{File: f, Rev: r - 1}, KindP1, 1
			}
			off += 300
			b.Entries = append(b.Entries, e)
		}
		b.Tail = Tail{End: off}
		if err := db.Commit(&b); err != nil {
			return err
		}
	}
	return db.Close()
}

func benchDir(b *testing.B) (dir string, tableBytes int64) {
	dir = b.TempDir()
	if err := benchIndex(dir); err != nil {
		b.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	for _, p := range tables {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		tableBytes += st.Size()
	}
	return dir, tableBytes
}

// BenchmarkCheckFiles: what Open's check of badger's files costs, per
// table byte.
func BenchmarkCheckFiles(b *testing.B) {
	dir, n := benchDir(b)
	b.SetBytes(n)
	b.ReportAllocs()
	opt := badgerOptions(dir, Options{ReadOnly: true})
	for b.Loop() {
		if err := checkFiles(dir, opt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdScan opens the index read-only and reads every entry,
// with and without badger's checksum verification of each block read:
// each block is read (and verified) once, the cost at its highest.
func BenchmarkColdScan(b *testing.B) {
	for _, m := range []struct {
		name string
		mode options.ChecksumVerificationMode
	}{{"none", options.NoVerification}, {"block", options.OnBlockRead}} {
		b.Run(m.name, func(b *testing.B) {
			dir, n := benchDir(b)
			b.SetBytes(n)
			b.ResetTimer()
			for b.Loop() {
				bdb, err := badger.Open(badgerOptions(dir, Options{ReadOnly: true}).WithChecksumVerificationMode(m.mode))
				if err != nil {
					b.Fatal(err)
				}
				db := &DB{bdb: bdb, dir: dir, opt: Options{ReadOnly: true}}
				count := 0
				err = db.All(context.Background(), func(Entry) error { count++; return nil })
				if err != nil || count != 100000 {
					b.Fatalf("%d entries, %v", count, err)
				}
				bdb.Close()
			}
		})
	}
}
