package mount

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckMountPoint(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) string {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, p)
	}
	empty := mk("empty")
	full := mk("full")
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mnt2 := mk("m2")
	tests := []struct {
		name, mnt, store string
		want             error
	}{
		{"ok", empty, filepath.Join(dir, "store"), nil},
		{"missing", filepath.Join(dir, "nope"), filepath.Join(dir, "store"), ErrMountPoint},
		{"a file", file, filepath.Join(dir, "store"), ErrMountPoint},
		{"not empty", full, filepath.Join(dir, "store"), ErrMountPoint},
		{"store inside mount point", mnt2, filepath.Join(mnt2, "store"), ErrOverlap},
		{"mount point inside store", empty, dir, ErrOverlap},
		{"same", empty, empty, ErrOverlap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := checkMountPoint(tt.mnt, tt.store)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("checkMountPoint(%s, %s) = %v, want %v", tt.mnt, tt.store, err, tt.want)
			}
		})
	}
}

func TestCheckFUSEMissingDevice(t *testing.T) {
	if err := checkFUSE(filepath.Join(t.TempDir(), "fuse")); !errors.Is(err, ErrNoFUSE) {
		t.Fatalf("checkFUSE of a missing device: %v, want ErrNoFUSE", err)
	}
}
