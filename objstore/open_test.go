package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenNotAStore(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir, Config{}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("empty dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("opening a non-store left a LOCK file behind")
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o644)
	if _, err := Open(dir, Config{Create: true}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("create in non-empty dir: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("something else\n"), 0o644)
	if _, err := Open(dir, Config{}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("foreign FORMAT: %v", err)
	}
}

func TestOpenNewerFormat(t *testing.T) {
	_, dir := openNew(t, Config{})
	// openNew's cleanup closes it; use a copy of FORMAT semantics on a fresh store.
	dir2 := t.TempDir()
	s, err := Open(dir2, Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.WriteFile(filepath.Join(dir2, "FORMAT"), []byte(formatMagic+"\nformat 99\n"), 0o644)
	_, err = Open(dir2, Config{})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "99") {
		t.Fatalf("newer format: %v", err)
	}
	os.WriteFile(filepath.Join(dir2, "FORMAT"), []byte(formatMagic+"\nformat x\n"), 0o644)
	if _, err = Open(dir2, Config{}); !errors.Is(err, ErrFormat) {
		t.Fatalf("unreadable format: %v", err)
	}
	_ = dir
}

func TestLockSameProcess(t *testing.T) {
	s, dir := openNew(t, Config{Holder: "/mnt/here"})
	_, err := Open(dir, Config{})
	var le *LockError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("second open: %v", err)
	}
	if le.PID != fmt.Sprint(os.Getpid()) || le.Holder != "/mnt/here" {
		t.Fatalf("lock error names %q %q", le.PID, le.Holder)
	}
	if !strings.Contains(err.Error(), "/mnt/here") {
		t.Fatalf("message %q does not name the mount point", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	s2.Close()
}

func TestLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	cmd, stdin, _, first := startHelper(t, "hold-lock", dir)
	if first != "locked" {
		t.Fatalf("helper said %q", first)
	}
	_, err = Open(dir, Config{})
	var le *LockError
	if !errors.As(err, &le) || le.PID != fmt.Sprint(cmd.Process.Pid) || le.Holder != "/mnt/helper" {
		t.Fatalf("open while helper %d holds the lock: %v", cmd.Process.Pid, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	s, err = Open(dir, Config{})
	if err != nil {
		t.Fatalf("open after helper exit: %v", err)
	}
	s.Close()
}

func FuzzParseFormat(f *testing.F) {
	f.Add([]byte(formatMagic + "\nformat 1\n"))
	f.Add([]byte(formatMagic + "\nformat 99\n"))
	f.Add([]byte("junk"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseFormat("d", b)
		if err == nil && (v < oldestFormat || v > FormatVersion) {
			t.Fatalf("accepted version %d", v)
		}
		if err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, ErrNotStore) {
			t.Fatalf("error matches neither sentinel: %v", err)
		}
	})
}

// RequireFormat raises a store written by an older build (FORMAT and the
// index's version) durably: a reopen, as an older build would, reads the
// new version; a version past this build's and a read-only store refuse.
func TestRequireFormatRaises(t *testing.T) {
	dir := t.TempDir()
	s := openAtFormat(t, dir, 3)
	if err := s.RequireFormat(FormatMountIDs); err != nil {
		t.Fatal(err)
	}
	if err := s.RequireFormat(FormatVersion + 1); !errors.Is(err, ErrFormat) {
		t.Fatalf("a version past this build's: %v, want ErrFormat", err)
	}
	s.Close()
	if v, err := readFormat(dir); err != nil || v != FormatMountIDs {
		t.Fatalf("FORMAT says %d (%v), want %d", v, err, FormatMountIDs)
	}
	ro, err := Open(dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.format != FormatMountIDs {
		t.Fatalf("index format %d, want %d", ro.format, FormatMountIDs)
	}
	if err := ro.RequireFormat(FormatMountIDs); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only: %v, want ErrReadOnly", err)
	}
}

// TestReadOnlyOpenAfterKillDuringLogCreate: an empty memtable or value
// log, which a writer killed between creating and sizing it leaves, no
// longer stops a read-only open (badger: "while opening memtable ...
// truncate"; the read-only commands failed until a writable open ran):
// the store is recovered first, as after a torn log, and reads back.
func TestReadOnlyOpenAfterKillDuringLogCreate(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.NewFile("f")
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Put(context.Background(), PutRequest{File: f, Data: []byte("kept\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00009.mem", "000009.vlog"} {
		if err := os.WriteFile(filepath.Join(dir, "index", name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		ro, err := Open(dir, Config{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only open with an empty %s: %v", name, err)
		}
		got, err := ro.Get(context.Background(), e.ID())
		if cerr := ro.Close(); err != nil || cerr != nil || string(got) != "kept\n" {
			t.Fatalf("with an empty %s: %q, %v, close %v", name, got, err, cerr)
		}
	}
}
