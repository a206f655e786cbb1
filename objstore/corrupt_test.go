package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// buildCorruptFixture writes a store with chains, merges and dedups and
// returns its directory, entries and contents.
func buildCorruptFixture(t *testing.T) (string, map[index.RevID]index.Entry, map[index.RevID][]byte) {
	s, dir := openNew(t, Config{SegmentSize: 32 << 10})
	r := rand.New(rand.NewPCG(9, 10))
	texts := map[index.RevID][]byte{}
	var first []byte
	for f := range 3 {
		id := mustNewFile(t, s, fmt.Sprint(f))
		text := genText(r, 6000)
		if f == 2 {
			text = first // file 2 starts as a copy of file 0: a dedup
		}
		var prev, prev2 index.RevID
		for range 25 {
			e := mustPut(t, s, PutRequest{File: id, Data: text, P1: prev, P2: prev2})
			texts[e.ID()] = text
			prev2, prev = prev, e.ID()
			text = edit(r, text, 3)
		}
		if f == 0 {
			first = texts[index.RevID{File: id}]
		}
	}
	entries := map[index.RevID]index.Entry{}
	err := s.idx.All(context.Background(), func(e index.Entry) error { entries[e.ID()] = e; return nil })
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return dir, entries, texts
}

// dependsOn reports whether rebuilding id reads the record of bad.
func dependsOn(entries map[index.RevID]index.Entry, id, bad index.RevID) bool {
	e := entries[id]
	if e.Kind == index.KindDedup {
		e = entries[e.Base]
	}
	for {
		if e.ID() == bad {
			return true
		}
		if e.Kind == index.KindFull {
			return false
		}
		if !e.Base2.IsNull() && dependsOn(entries, e.Base2, bad) {
			return true // a two-base record's graph: both bases
		}
		e = entries[e.Base]
	}
}

func TestBitFlip(t *testing.T) {
	dir, entries, texts := buildCorruptFixture(t)
	var stored []index.Entry
	for _, e := range entries {
		if e.Kind != index.KindDedup {
			stored = append(stored, e)
		}
	}
	r := rand.New(rand.NewPCG(11, 12))
	for trial := range 20 {
		victim := stored[r.IntN(len(stored))]
		if trial == 0 {
			victim = entries[index.RevID{File: 1}] // the root of file 1 (and 3's dedup)
		}
		off := victim.Off + uint64(r.IntN(int(victim.Stored)))
		copyDir := filepath.Join(t.TempDir(), "store")
		copyTree(t, dir, copyDir)
		flipByte(t, filepath.Join(copyDir, "segments", segName(victim.Seg)), int64(off), byte(1+r.IntN(255)))
		t.Run(fmt.Sprintf("flip %v at %d", victim.ID(), off), func(t *testing.T) {
			checkFlip(t, copyDir, entries, texts, victim.ID())
		})
	}
}

func checkFlip(t *testing.T, dir string, entries map[index.RevID]index.Entry, texts map[index.RevID][]byte, bad index.RevID) {
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	affected := map[index.RevID]bool{}
	for id := range entries {
		got, err := s.Get(context.Background(), id)
		if !dependsOn(entries, id, bad) {
			if err != nil || !bytes.Equal(got, texts[id]) {
				t.Errorf("%v does not depend on %v but reads: %v", id, bad, err)
			}
			continue
		}
		affected[id] = true
		if err == nil {
			t.Errorf("%v depends on flipped %v but read without error (right bytes: %v)", id, bad, bytes.Equal(got, texts[id]))
			continue
		}
		name := fmt.Sprintf("revision %d of file %d", id.Rev, id.File)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %q does not match ErrCorrupt naming %q", id, err, name)
		}
	}
	t.Logf("%d revisions depend on %v", len(affected), bad)
	reported := map[index.RevID]bool{}
	n, err := s.Verify(context.Background(), func(p Problem) { reported[p.Rev] = true })
	if err != nil {
		t.Fatal(err)
	}
	if n != len(affected) || len(reported) != len(affected) {
		t.Fatalf("verify reported %d (%d distinct), want %d affected", n, len(reported), len(affected))
	}
	for id := range affected {
		if !reported[id] {
			t.Errorf("verify missed %v", id)
		}
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// A segment file that is gone lost the records the index names in it:
// reading one of them is corruption (an I/O error in the mount), not
// "no such file or directory" (which the mount served for a file its
// listing showed, a user review).
func TestMissingSegmentIsCorrupt(t *testing.T) {
	dir, entries, texts := buildCorruptFixture(t)
	copyDir := filepath.Join(t.TempDir(), "store")
	copyTree(t, dir, copyDir)
	if err := os.Remove(filepath.Join(copyDir, "segments", segName(1))); err != nil {
		t.Fatal(err)
	}
	s, err := Open(copyDir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lost, read := 0, 0
	for id, e := range entries {
		if e.Kind == index.KindDedup {
			continue
		}
		got, err := s.Get(context.Background(), id)
		switch {
		case err == nil:
			if !bytes.Equal(got, texts[id]) {
				t.Fatalf("%v: wrong bytes", id)
			}
			read++
		case !errors.Is(err, ErrCorrupt) || errors.Is(err, os.ErrNotExist):
			t.Fatalf("%v: %v, want corruption, not a missing file", id, err)
		default:
			lost++
		}
	}
	if lost == 0 {
		t.Fatalf("no revision lost (%d read) with segment 1 gone", read)
	}
}
