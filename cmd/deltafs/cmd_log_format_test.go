package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/mount"
)

// A deleted file's path with a newline, and a snapshot name with a
// comma, are quoted in the text listings: each file stays on one line,
// and the snapshot column's commas still part names (a review).
func TestLogListingsQuoteNames(t *testing.T) {
	var b bytes.Buffer
	if err := printDeleted(&b, []mount.DeletedFile{{FileInfo: mount.FileInfo{Path: "new\nline.txt", File: 3}, Revisions: 1, Time: time.Unix(0, 0)}}, false); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "\n") != 1 || !strings.Contains(b.String(), `"new\nline.txt"`) {
		t.Errorf("deleted listing %q", b.String())
	}
	b.Reset()
	l := mount.FileLog{Revisions: []mount.RevInfo{{Rev: 0, Time: time.Unix(0, 0), Snapshots: []string{"a,b", "c"}}}}
	if err := printLog(&b, l, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"a,b",c`) {
		t.Errorf("log %q", b.String())
	}
}
