package index

import (
	"context"
	"errors"
	"testing"
)

func TestCheckSnapshotName(t *testing.T) {
	for _, name := range []string{"a\nb", "tab\there", "\x7f", "\x01x", "cr\r", "\x1f"} {
		if err := CheckSnapshotName(name); !errors.Is(err, ErrBadName) {
			t.Errorf("CheckSnapshotName(%q) = %v, want ErrBadName", name, err)
		}
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v: a file name may hold control characters", name, err)
		}
	}
	for _, name := range []string{"ok", "a b", "été", "x~!@#$%^&*()", "\u0080x"} {
		if err := CheckSnapshotName(name); err != nil {
			t.Errorf("CheckSnapshotName(%q) = %v", name, err)
		}
	}
	if err := CheckSnapshotName("a/b"); !errors.Is(err, ErrBadName) {
		t.Errorf("CheckSnapshotName(a/b) = %v: CheckName's rules must hold too", err)
	}
}

// TestSnapshotControlNames: no new snapshot name holds a control
// character, but one an older build wrote still lists and can be
// renamed away and deleted.
func TestSnapshotControlNames(t *testing.T) {
	db := openSnapDB(t)
	b, h, _ := sampleTree().Encode()
	if err := db.PutTrees(map[TreeHash][]byte{h: b}); err != nil {
		t.Fatal(err)
	}
	refs := NewRefs()
	if _, err := db.CreateSnapshot(&Snapshot{Name: "a\nb", Root: dirEntry(h)}, refs, nil); !errors.Is(err, ErrBadName) {
		t.Fatalf("create with a newline: %v", err)
	}
	if _, err := db.CreateSnapshot(&Snapshot{Name: "one", Root: dirEntry(h)}, refs, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.RenameSnapshot("one", "x\ty"); !errors.Is(err, ErrBadName) {
		t.Fatalf("rename to a tab: %v", err)
	}
	// As an older build, which checked CheckName's rules only.
	rb, err := encodeRefs(refs)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.createSnapshot(&Snapshot{Name: "old\nname", Root: dirEntry(h)}, refs, rb, nil); err != nil {
		t.Fatal(err)
	}
	var names []string
	err = db.Snapshots(context.Background(), func(s Snapshot) error { names = append(names, s.Name); return nil })
	if err != nil || len(names) != 2 || names[1] != "old\nname" {
		t.Fatalf("listing %q, %v", names, err)
	}
	if _, err := db.Snapshot("old\nname"); err != nil {
		t.Fatalf("lookup of the old name: %v", err)
	}
	if err := db.RenameSnapshot("old\nname", "fixed"); err != nil {
		t.Fatalf("renaming the old name away: %v", err)
	}
	if err := db.DeleteSnapshot("fixed"); err != nil {
		t.Fatal(err)
	}
}
