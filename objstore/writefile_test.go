package objstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileSyncErrorsReadOnce: a failed WriteFileSync names the file
// once, the step that failed and its cause, keeps the cause matchable
// and leaves no temporary file; its callers add their own prefix once.
func TestWriteFileSyncErrorsReadOnce(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	occupied := filepath.Join(dir, "occupied") // a non-empty directory: the rename fails
	if err := os.MkdirAll(filepath.Join(occupied, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want string
		is   error
	}{
		{"missing directory", WriteFileSync(filepath.Join(missing, "f"), []byte("x"), 0o644),
			"write " + missing + "/f: create f.tmp: no such file or directory", fs.ErrNotExist},
		{"rename over a directory", WriteFileSync(occupied, []byte("x"), 0o644),
			"write " + occupied + ": rename occupied.tmp: ", nil}, // the errno is the kernel's choice
		{"FORMAT", writeFormat(missing, FormatVersion),
			"objstore: write " + missing + "/FORMAT: create FORMAT.tmp: no such file or directory", fs.ErrNotExist},
		{"repack switch", writeSwitch(missing),
			"objstore: repack: write " + filepath.Join(missing, shadowName, switchName) + ": create " + switchName + ".tmp: no such file or directory", fs.ErrNotExist},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		got := c.err.Error()
		if c.is == nil && !strings.HasPrefix(got, c.want) || c.is != nil && got != c.want {
			t.Errorf("%s: error\n  %s\nwant\n  %s", c.name, got, c.want)
		}
		if c.is != nil && !errors.Is(c.err, c.is) {
			t.Errorf("%s: %v does not match %v", c.name, c.err, c.is)
		}
	}
	if _, err := os.Lstat(occupied + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed rename left its temporary file (%v)", err)
	}
}
