package objstore

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	badger "github.com/dgraph-io/badger/v4"
)

// verifyFixture is a store of two files with a few revisions each and two
// snapshots of a tree with a subdirectory.
type verifyFixture struct {
	dir     string
	a, b    []index.Entry // revisions of the two files
	sub     index.TreeHash
	s1, s2  index.Snapshot
	subPath string
}

func buildVerifyFixture(t *testing.T) verifyFixture {
	t.Helper()
	s, dir := openNew(t, Config{})
	ctx := context.Background()
	fx := verifyFixture{dir: dir}
	fa, fb := mustNewFile(t, s, "a"), mustNewFile(t, s, "b")
	text := []byte(strings.Repeat("some text that deltas well\n", 400))
	for i := range 4 {
		text = append(text, []byte("one more line\n")...)
		req := PutRequest{File: fa, Data: append([]byte(nil), text...)}
		if i > 0 {
			req.P1 = fx.a[i-1].ID()
		}
		fx.a = append(fx.a, mustPut(t, s, req))
		req = PutRequest{File: fb, Data: append([]byte("b: "), text...)}
		if i > 0 {
			req.P1 = fx.b[i-1].ID()
		}
		fx.b = append(fx.b, mustPut(t, s, req))
	}
	snap := func(name string, a, b index.Entry) index.Snapshot {
		sub := index.Tree{Entries: []index.TreeEntry{{Name: "b", Mode: syscall.S_IFREG | 0o644, Nlink: 1, Size: b.Size, Rev: b.ID()}}}
		sb, sh, err := sub.Encode()
		if err != nil {
			t.Fatal(err)
		}
		root := index.Tree{Entries: []index.TreeEntry{
			{Name: "a", Mode: syscall.S_IFREG | 0o644, Nlink: 1, Size: a.Size, Rev: a.ID()},
			{Name: "d", Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Tree: sh},
		}}
		rb, rh, err := root.Encode()
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.CreateSnapshot(ctx, SnapshotRequest{Name: name, Time: time.Unix(1, 0),
			Root: index.TreeEntry{Mode: syscall.S_IFDIR | 0o755, Nlink: 3, Tree: rh}, Trees: map[index.TreeHash][]byte{sh: sb, rh: rb}})
		if err != nil {
			t.Fatal(err)
		}
		fx.sub = sh
		return res.Snapshot
	}
	fx.s1 = snap("s1", fx.a[1], fx.b[1])
	fx.s2 = snap("s2", fx.a[3], fx.b[3])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// editIndex changes the index of the (closed) store in dir directly.
func editIndex(t *testing.T, dir string, fn func(txn *badger.Txn) error) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "index")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func revRowKey(id index.RevID) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64([]byte("r/"), uint64(id.File)), uint32(id.Rev))
}

func refsRowKey(id index.SnapshotID) []byte {
	return binary.BigEndian.AppendUint64([]byte("s/r/"), uint64(id))
}

func verifyAll(t *testing.T, dir string) ([]Problem, VerifySummary) {
	t.Helper()
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []Problem
	sum, err := s.VerifyAll(context.Background(), func(p Problem) { got = append(got, p) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Problems != len(got) {
		t.Fatalf("summary says %d problems, %d reported", sum.Problems, len(got))
	}
	return got, sum
}

func TestVerifyCleanStoreWithSnapshots(t *testing.T) {
	fx := buildVerifyFixture(t)
	got, sum := verifyAll(t, fx.dir)
	if len(got) != 0 {
		t.Fatalf("clean store: %v", got)
	}
	if sum.Revisions != 8 || sum.Files != 2 || sum.Snapshots != 2 || sum.Trees != 4 || sum.Segments != 1 {
		t.Fatalf("summary %+v", sum)
	}
}

// TestVerifyNamesEachCorruption damages one thing at a time in a copy of
// the fixture and checks that verify names it: its kind, revision and
// where.
func TestVerifyNamesEachCorruption(t *testing.T) {
	fx := buildVerifyFixture(t)
	victim := fx.a[2]
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   Problem // Kind, Rev, Path (substring), Err (substring of its text)
		errSub string
	}{
		{"flip a segment byte", func(t *testing.T, dir string) {
			flipByte(t, filepath.Join(dir, "segments", segName(victim.Seg)), int64(victim.Off+recHeaderLen+2), 0x40)
		}, Problem{Kind: ProblemRevision, Rev: victim.ID()}, "checksum"},
		{"delete a tree key", func(t *testing.T, dir string) {
			editIndex(t, dir, func(txn *badger.Txn) error { return txn.Delete(append([]byte("t/"), fx.sub[:]...)) })
		}, Problem{Kind: ProblemTree, Path: "snapshot s2/d"}, "is missing"},
		{"change a tree's bytes", func(t *testing.T, dir string) {
			other := index.Tree{}
			b, _, _ := other.Encode()
			editIndex(t, dir, func(txn *badger.Txn) error { return txn.Set(append([]byte("t/"), fx.sub[:]...), b) })
		}, Problem{Kind: ProblemTree, Path: "snapshot s2/d"}, "content hashes to"},
		{"swap two reference sets", func(t *testing.T, dir string) {
			editIndex(t, dir, func(txn *badger.Txn) error {
				it, err := txn.Get(refsRowKey(fx.s1.ID))
				if err != nil {
					return err
				}
				v, err := it.ValueCopy(nil)
				if err != nil {
					return err
				}
				return txn.Set(refsRowKey(fx.s2.ID), v)
			})
		}, Problem{Kind: ProblemRefs, Rev: fx.a[3].ID(), Path: "snapshot s2"}, "missing from its reference set"},
		{"delete a revision's entry", func(t *testing.T, dir string) {
			editIndex(t, dir, func(txn *badger.Txn) error { return txn.Delete(revRowKey(victim.ID())) })
		}, Problem{Kind: ProblemSegment, Rev: victim.ID(), Path: "segment 1 at"}, "no index entry points at"},
		{"entry pointing outside the data", func(t *testing.T, dir string) {
			e := victim
			e.Off += 1 << 30
			b, _ := e.MarshalBinary()
			editIndex(t, dir, func(txn *badger.Txn) error { return txn.Set(revRowKey(victim.ID()), b) })
		}, Problem{Kind: ProblemRevision, Rev: victim.ID()}, "beyond the committed tail"},
		{"entry pointing into another record", func(t *testing.T, dir string) {
			e := victim
			e.Off += 8
			b, _ := e.MarshalBinary()
			editIndex(t, dir, func(txn *badger.Txn) error { return txn.Set(revRowKey(victim.ID()), b) })
		}, Problem{Kind: ProblemIndex, Rev: fx.b[2].ID(), Path: "segment 1 at"}, "overlaps the record of " + victim.ID().String()},
		{"tree naming a missing revision", func(t *testing.T, dir string) {
			editIndex(t, dir, func(txn *badger.Txn) error { return txn.Delete(revRowKey(fx.b[3].ID())) })
		}, Problem{Kind: ProblemTree, Rev: fx.b[3].ID(), Path: "snapshot s2/d/b"}, "does not have"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			copyTree(t, fx.dir, dir)
			tt.damage(t, dir)
			got, _ := verifyAll(t, dir)
			for _, p := range got {
				if p.Kind == tt.want.Kind && p.Rev == tt.want.Rev && strings.Contains(p.Path, tt.want.Path) &&
					strings.Contains(p.Err.Error(), tt.errSub) {
					t.Logf("found: %v (of %d problems)", p, len(got))
					return
				}
			}
			t.Fatalf("no %s problem for %v at %q saying %q among %d: %v", tt.want.Kind, tt.want.Rev, tt.want.Path, tt.errSub, len(got), got)
		})
	}
}
