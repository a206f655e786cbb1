package mount

import (
	"encoding/binary"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

func someIDs(n int) map[fs.FileID]index.FileID {
	ids := map[fs.FileID]index.FileID{}
	for i := range n {
		ids[fs.NewFileID()] = index.FileID(i + 1)
	}
	return ids
}

// idsStore makes a store for openIDs to raise the format of.
func idsStore(t *testing.T) *objstore.Store {
	t.Helper()
	st, err := objstore.Open(filepath.Join(t.TempDir(), "s.dfs"), objstore.Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func encodeIDs(ids map[fs.FileID]index.FileID) []byte {
	b := append([]byte(nil), idsHeader...)
	for id, fid := range ids {
		b = appendIDRecord(b, id, fid)
	}
	return b
}

// A format 1 file (24-byte records, no checksum) reads as it is and is
// rewritten as format 2 by a writable open, which then appends format 2
// records.
func TestIDsFileFormat1IsRewritten(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, idsFile)
	want := someIDs(5)
	var v1 []byte
	for id, fid := range want {
		v1 = binary.BigEndian.AppendUint64(append(v1, id[:]...), uint64(fid))
	}
	if err := os.WriteFile(p, append(v1, 1, 2, 3), 0o600); err != nil { // and a torn tail
		t.Fatal(err)
	}
	if got, err := readIDs(dir); err != nil || !maps.Equal(got, want) {
		t.Fatalf("format 1 read: %v, %v", got, err)
	}
	got := map[fs.FileID]index.FileID{}
	f, err := openIDs(idsStore(t), p, got, quiet())
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("openIDs: %v, %v", got, err)
	}
	extra := fs.NewFileID()
	if _, err := f.Write(appendIDRecord(nil, extra, 99)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, _ := os.ReadFile(p)
	if len(b) != len(idsHeader)+6*idRecordLen {
		t.Fatalf("%d bytes, want the header and 6 format 2 records", len(b))
	}
	want[extra] = 99
	if got, err := readIDs(dir); err != nil || !maps.Equal(got, want) {
		t.Fatalf("after the rewrite: %v, %v", got, err)
	}
}

// A torn tail (a record cut short, or whole but failing its checksum
// with no good record after it) is left out by readers and cut off by a
// writable open; a bad record before a good one is an error.
func TestIDsFileTornTailAndDamage(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, idsFile)
	want := someIDs(3)
	good := encodeIDs(want)
	for name, tail := range map[string][]byte{
		"cut short": appendIDRecord(nil, fs.NewFileID(), 7)[:20],
		"zeros":     make([]byte, 2*idRecordLen),
	} {
		if err := os.WriteFile(p, append(append([]byte(nil), good...), tail...), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := readIDs(dir); err != nil || !maps.Equal(got, want) {
			t.Fatalf("%s: read %v, %v", name, got, err)
		}
		got := map[fs.FileID]index.FileID{}
		f, err := openIDs(idsStore(t), p, got, quiet())
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("%s: openIDs %v, %v", name, got, err)
		}
		f.Close()
		if st, _ := os.Stat(p); st.Size() != int64(len(good)) {
			t.Fatalf("%s: %d bytes after the open, want the tail cut off at %d", name, st.Size(), len(good))
		}
	}
	damaged := append([]byte(nil), good...)
	damaged[len(idsHeader)+idRecordLen+3] ^= 0x10 // the second of three records
	if err := os.WriteFile(p, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readIDs(dir); !errors.Is(err, errIDs) {
		t.Fatalf("a damaged record: %v, want errIDs", err)
	}
	if _, err := openIDs(idsStore(t), p, map[fs.FileID]index.FileID{}, quiet()); !errors.Is(err, errIDs) {
		t.Fatalf("openIDs of a damaged record: %v, want errIDs", err)
	}
	// A damaged header (or a newer version's) is damage, not format 1.
	for _, flip := range []int{0, 7} {
		damaged = append([]byte(nil), good...)
		damaged[flip] ^= 0x04
		if err := os.WriteFile(p, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readIDs(dir); !errors.Is(err, errIDs) {
			t.Fatalf("header byte %d flipped: %v, want errIDs", flip, err)
		}
	}
}

// Any bytes parse without a panic; what parses without an error, written
// again as format 2, parses to the same map.
func FuzzParseIDs(f *testing.F) {
	ids := someIDs(2)
	f.Add(encodeIDs(ids))
	f.Add(encodeIDs(ids)[:30])
	var v1 []byte
	for id, fid := range ids {
		v1 = binary.BigEndian.AppendUint64(append(v1, id[:]...), uint64(fid))
	}
	f.Add(v1)
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[fs.FileID]index.FileID{}
		scan, err := parseIDs(b, got)
		if err != nil {
			if !errors.Is(err, errIDs) {
				t.Fatalf("error not errIDs: %v", err)
			}
			return
		}
		if scan.good > len(b) {
			t.Fatalf("good %d past %d bytes", scan.good, len(b))
		}
		again := map[fs.FileID]index.FileID{}
		if s2, err := parseIDs(encodeIDs(got), again); err != nil || s2.v1 || !maps.Equal(again, got) {
			t.Fatalf("re-encoded: %v (%v), want %v", again, err, got)
		}
	})
}
