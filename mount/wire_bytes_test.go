package mount

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unicode/utf8"
)

// A ByteString round-trips through JSON byte for byte; UTF-8 keeps the
// plain string form older mounts and clients read.
func TestByteStringJSON(t *testing.T) {
	for _, s := range []string{"", "notes.txt", "dir/é\u2028<&>\x01", "a\xff\x80b", "\xff", "ok/\xc3"} {
		b, err := json.Marshal(Request{Op: "log", Path: ByteString(s)})
		mustDo(t, err)
		var r Request
		mustDo(t, json.Unmarshal(b, &r))
		if string(r.Path) != s {
			t.Errorf("%q: sent as %s, read back as %q", s, b, r.Path)
		}
		var old struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(b, &old); utf8.ValidString(s) && (err != nil || old.Path != s) {
			t.Errorf("%q: a plain string reader reads %q, %v", s, old.Path, err)
		}
	}
	ri := RevInfo{Rev: 3, Size: 9, Base: "p1", Snapshots: []string{"ok", "s\xff\x80"}, P1: &RevRef{File: 2, Rev: 2}}
	b, err := json.Marshal(FileLog{Revisions: []RevInfo{ri}})
	mustDo(t, err)
	var back FileLog
	mustDo(t, json.Unmarshal(b, &back))
	if len(back.Revisions) != 1 || !reflect.DeepEqual(back.Revisions[0], ri) || !bytes.Contains(b, []byte(`"snapshots":["ok",{"bytes":`)) {
		t.Errorf("revision %+v sent as %s, read back as %+v", ri, b, back.Revisions)
	}
	var s ByteString
	for _, bad := range []string{`12`, `[1]`, `{"bytes": "!!"}`, `true`} {
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s decoded as %q", bad, s)
		}
	}
}

// TestHistoryNonUTF8Names drives log, cat, restore and the snapshot
// commands through a real mount's control socket with names holding
// bytes that are not UTF-8 (0xff, 0x80): each names the file or snapshot
// it was given, byte for byte, and errors name it as it is.
func TestHistoryNonUTF8Names(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	ctx := context.Background()
	name, other := "d\xff/f\x80\xff.txt", "d\xff/f\x80\xfe.txt" // one byte apart, both mangled alike by JSON
	mustDo(t, os.Mkdir(l.mnt+"/d\xff", 0o755))
	mustDo(t, os.WriteFile(l.mnt+"/"+name, []byte("one\n"), 0o644))
	mustDo(t, os.WriteFile(l.mnt+"/"+other, []byte("other\n"), 0o644))
	c := connect(t, l.mnt, false)
	snap, renamed := "s\xff\x80", "t\x80\xff"
	s, err := c.CreateSnapshot(ctx, snap)
	if err != nil || s.Name != snap {
		t.Fatalf("create snapshot %q: %q, %v", snap, s.Name, err)
	}
	if _, err := os.Stat(l.mnt + "/.snapshots/" + snap + "/" + name); err != nil {
		t.Fatalf("the snapshot's directory: %v", err)
	}
	mustDo(t, os.WriteFile(l.mnt+"/"+name, []byte("two\n"), 0o644))

	lg, err := c.Log(ctx, Target{Path: name})
	if err != nil || string(lg.Path) != name || len(lg.Revisions) != 2 || len(lg.Revisions[0].Snapshots) != 1 || lg.Revisions[0].Snapshots[0] != snap {
		t.Fatalf("log %q: %+v, %v", name, lg, err)
	}
	for spec, want := range map[string]string{"rev 0": "one\n", "snapshot": "one\n", "newest": "two\n"} {
		var rs RevSpec
		switch spec {
		case "rev 0":
			rs.Rev = new(uint32)
		case "snapshot":
			rs.Snapshot = ByteString(snap)
		}
		if _, data, err := CatBytes(ctx, c, Target{Path: name}, rs); err != nil || string(data) != want {
			t.Errorf("cat %q %s: %q, %v", name, spec, data, err)
		}
	}
	if _, data, err := CatBytes(ctx, c, Target{Path: other}, RevSpec{}); err != nil || string(data) != "other\n" {
		t.Errorf("cat %q: %q, %v", other, data, err)
	}
	fr, err := c.Restore(ctx, Target{Path: name}, new(uint32))
	if info := fr.Revision; err != nil || info.Rev != 2 || info.P2 == nil || info.P2.Rev != 0 || string(fr.Path) != name {
		t.Fatalf("restore %q: %+v, %v", name, fr, err)
	}
	if b, err := os.ReadFile(l.mnt + "/" + name); err != nil || string(b) != "one\n" {
		t.Fatalf("live file after restore: %q, %v", b, err)
	}
	if b, _ := os.ReadFile(l.mnt + "/" + other); string(b) != "other\n" {
		t.Fatalf("the other file after restore: %q", b)
	}
	if _, err := c.Log(ctx, Target{Path: "d\xff/gone\x80"}); err == nil || !bytes.Contains([]byte(err.Error()), []byte("d\xff/gone\x80")) {
		t.Errorf("log of a missing file: %v", err)
	}

	mustDo(t, c.RenameSnapshot(ctx, snap, renamed))
	list, err := c.ListSnapshots(ctx)
	if err != nil || len(list) != 1 || list[0].Name != renamed {
		t.Fatalf("list after rename: %+v, %v", list, err)
	}
	if err := c.DeleteSnapshot(ctx, snap); err == nil {
		t.Errorf("delete of the old name %q succeeded", snap)
	}
	mustDo(t, c.DeleteSnapshot(ctx, renamed))
	if list, err := c.ListSnapshots(ctx); err != nil || len(list) != 0 {
		t.Fatalf("list after delete: %+v, %v", list, err)
	}
}
