package index

import (
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func sampleTree() *Tree {
	t := &Tree{Entries: []TreeEntry{
		{Name: "b.txt", Mode: syscall.S_IFREG | 0o644, UID: 1000, GID: 100, Nlink: 2, Ino: 77, Size: 12,
			Atime: 1, Mtime: -2, Ctime: 3, Rev: RevID{File: 5, Rev: 9},
			Xattrs: []Xattr{{Name: "user.a", Value: []byte("x")}, {Name: "user.b", Value: []byte{}}}},
		{Name: "a", Mode: syscall.S_IFDIR | 0o755, Nlink: 3, Ino: 78, Tree: TreeHash{1, 2, 3}},
		{Name: "l", Mode: syscall.S_IFLNK | 0o777, Nlink: 1, Ino: 79, Size: 5, Target: "b.txt"},
		{Name: "fifo", Mode: syscall.S_IFIFO | 0o600, Nlink: 1, Ino: 80, Rdev: 7},
	}}
	t.Sort()
	return t
}

func TestTreeRoundTrip(t *testing.T) {
	tr := sampleTree()
	b, h, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var got Tree
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	for i := range got.Entries { // decoding gives nil for no xattrs
		if got.Entries[i].Xattrs == nil {
			got.Entries[i].Xattrs = tr.Entries[i].Xattrs
		}
	}
	if !reflect.DeepEqual(&got, tr) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, tr)
	}
	_, h2, _ := got.Encode()
	if h != h2 {
		t.Fatal("hash changed across a round trip")
	}
	if e, ok := got.Lookup("l"); !ok || e.Target != "b.txt" {
		t.Fatalf("Lookup(l) = %+v, %v", e, ok)
	}
	if _, ok := got.Lookup("zz"); ok {
		t.Fatal("Lookup found a missing name")
	}
}

func TestTreeRejects(t *testing.T) {
	tr := &Tree{Entries: []TreeEntry{{Name: "b"}, {Name: "a"}}}
	if _, err := tr.MarshalBinary(); err == nil {
		t.Fatal("unsorted tree encoded")
	}
	b, _, _ := sampleTree().Encode()
	for i := range b {
		var got Tree
		if err := got.UnmarshalBinary(b[:i]); !errors.Is(err, ErrDecode) {
			t.Fatalf("prefix of %d bytes: err %v", i, err)
		}
	}
	bad := &Tree{Entries: []TreeEntry{{Name: "x/y", Mode: syscall.S_IFREG}}}
	bb, _ := bad.MarshalBinary()
	var got Tree
	if err := got.UnmarshalBinary(bb); !errors.Is(err, ErrDecode) {
		t.Fatalf("name with a slash decoded: %v", err)
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true}, {"auto-2026-11-30T02:15:00Z", true}, {strings.Repeat("x", 255), true},
		{"", false}, {".", false}, {"..", false}, {"a/b", false}, {"/", false}, {"a\x00", false},
		{strings.Repeat("x", 256), false}, {"...", true},
	} {
		err := CheckName(tc.name)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadName)) {
			t.Errorf("CheckName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func FuzzTreeDecode(f *testing.F) {
	b, _, _ := sampleTree().Encode()
	f.Add(b)
	f.Add([]byte{treeVersion, 0})
	f.Add([]byte{treeVersion, 200, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var tr Tree
		if err := tr.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error not ErrDecode: %v", err)
			}
			return
		}
		again, err := tr.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded tree does not encode: %v", err)
		}
		var tr2 Tree
		if err := tr2.UnmarshalBinary(again); err != nil {
			t.Fatalf("re-encoded tree does not decode: %v", err)
		}
	})
}

func FuzzSnapshotDecode(f *testing.F) {
	s := Snapshot{ID: 3, Name: "x", Time: 99, Prev: 2, Root: TreeEntry{Mode: syscall.S_IFDIR | 0o755, Tree: TreeHash{9}}}
	b, _ := s.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Snapshot
		if err := s.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error not ErrDecode: %v", err)
			}
			return
		}
		again, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded snapshot does not encode: %v", err)
		}
		var s2 Snapshot
		if err := s2.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("re-encode mismatch: %v\n%+v\n%+v", err, s, s2)
		}
	})
}

func FuzzRefsDecode(f *testing.F) {
	r := NewRefs()
	for i := uint64(1); i < 1000; i++ {
		r.Add(i)
	}
	r.Add(5 << 32)
	b, _ := encodeRefs(r)
	f.Add(b)
	f.Add(b[8:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := decodeRefs(b); err != nil && !errors.Is(err, ErrDecode) {
			t.Fatalf("error not ErrDecode: %v", err)
		}
		// Past the checksum too: roaring's own parser must not panic
		// through decodeRefs.
		fixed := append(encodeSum(b), b...)
		if _, err := decodeRefs(fixed); err != nil && !errors.Is(err, ErrDecode) {
			t.Fatalf("error not ErrDecode: %v", err)
		}
	})
}
