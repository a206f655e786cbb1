package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestShortSegmentRefusedByGCAndRepack: a tail segment truncated behind
// the store's back (its last committed records lost) is damage a
// writable open reports (Damage) rather than logs; gc, its dry run and
// repack refuse on it with that one error, where they logged a warning
// and then failed at the first lost revision (a dry run passed), and
// leave the segment as it was; the revisions before the cut still read.
func TestShortSegmentRefusedByGCAndRepack(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f := mustNewFile(t, s, "f")
	first := mustPut(t, s, PutRequest{File: f, Data: bigMixed(3, 64<<10)})
	last := mustPut(t, s, PutRequest{File: f, Data: bigMixed(4, 64<<10)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "segments", segName(last.Seg))
	cut := int64(last.Off) + 10
	if err := os.Truncate(seg, cut); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(s.Damage(), ErrSegmentShort) {
		t.Errorf("Damage: %v, want ErrSegmentShort", s.Damage())
	}
	if _, err := s.Get(ctx, first.ID()); err != nil {
		t.Errorf("the revision before the cut: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() error{
		"gc --dry-run": func() error { _, err := GC(ctx, dir, GCOptions{DryRun: true}); return err },
		"gc":           func() error { _, err := GC(ctx, dir, GCOptions{}); return err },
		"repack":       func() error { _, err := Repack(ctx, dir, RepackOptions{}); return err },
	} {
		if err := run(); !errors.Is(err, ErrSegmentShort) {
			t.Errorf("%s: %v, want ErrSegmentShort", name, err)
		}
		if st, err := os.Stat(seg); err != nil || st.Size() != cut {
			t.Fatalf("%s changed the segment: %v, %v", name, st.Size(), err)
		}
	}
	// A mount goes on and writes past the cut (a hole where the lost
	// records were): the damage stays known to every later open, to gc
	// and repack, and verify reports it beside the lost revision (a
	// review found it gone after the next write).
	s, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	g := mustNewFile(t, s, "g")
	mustPut(t, s, PutRequest{File: g, Data: bigMixed(7, 64<<10)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		s, err = Open(dir, Config{ReadOnly: ro})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(s.Damage(), ErrSegmentShort) {
			t.Errorf("open (read-only %v) after a write past the cut: Damage %v", ro, s.Damage())
		}
		s.Close()
	}
	if _, err := GC(ctx, dir, GCOptions{DryRun: true}); !errors.Is(err, ErrSegmentShort) {
		t.Errorf("gc --dry-run after a write past the cut: %v", err)
	}
	s, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []ProblemKind
	if _, err := s.VerifyAll(ctx, func(p Problem) { kinds = append(kinds, p.Kind) }, nil); err != nil {
		t.Fatal(err)
	}
	if len(kinds) < 2 || kinds[len(kinds)-1] != ProblemSegment || !errors.Is(s.Damage(), ErrSegmentShort) {
		t.Errorf("verify of the damaged store: problems %v, damage %v; want the lost revision and the damage, kept", kinds, s.Damage())
	}
	s.Close()
}

// TestDamageClearedByACleanVerify: the mark of damage goes once the store
// verifies clean (the cut segment put back from a copy).
func TestDamageClearedByACleanVerify(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f := mustNewFile(t, s, "f")
	last := mustPut(t, s, PutRequest{File: f, Data: bigMixed(4, 64<<10)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "segments", segName(last.Seg))
	whole, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, int64(last.Off)+10); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Config{}); err != nil || s.Damage() == nil {
		t.Fatalf("open of the cut store: %v, damage %v", err, s.Damage())
	}
	s.Close()
	if err := os.WriteFile(seg, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	// Read-only, the mark cannot go, and a clean store is no problem
	// for it (a review: a read-only verify reported the old cut).
	if s, err = Open(dir, Config{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Verify(ctx, func(p Problem) { t.Errorf("read-only verify: %v", p) }); err != nil || n != 0 || s.Damage() == nil {
		t.Errorf("read-only verify of the mended store: %d problems, %v, damage %v (want kept)", n, err, s.Damage())
	}
	s.Close()
	if s, err = Open(dir, Config{}); err != nil {
		t.Fatal(err)
	}
	// Two verifies at once (two deltafs verify through one mount): both
	// clean, the mark removed once.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			n, err := s.Verify(ctx, func(p Problem) { t.Errorf("verify: %v", p) })
			if err == nil && n != 0 {
				err = fmt.Errorf("%d problems", n)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("verify of the mended store: %v", err)
		}
	}
	if s.Damage() != nil {
		t.Errorf("after the verifies: damage %v", s.Damage())
	}
	s.Close()
	if s, err = Open(dir, Config{}); err != nil || s.Damage() != nil {
		t.Fatalf("open after the clean verify: %v, damage %v", err, s.Damage())
	}
	s.Close()
	if _, err := GC(ctx, dir, GCOptions{DryRun: true}); err != nil {
		t.Errorf("gc --dry-run of the mended store: %v", err)
	}
}

// TestRepackNamesTheUnreadableRevision: a revision whose record is bad
// fails a repack under its own name. Tried as a base for another file's
// revision (a similar file, repacked beside it), it failed the repack of
// that revision instead, which reads well (a review: "revision 0 of file
// 6: revision 4 of file 5 unreadable"). The bad record is the newest of
// a long history, so that the other file reaches it first.
func TestRepackNamesTheUnreadableRevision(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	a := mustNewFile(t, s, "x/notes")
	text := bigMixed(9, 32<<10)
	var last index.Entry
	for i := range 300 {
		text = append([]byte(nil), text...)
		copy(text[i*64:], fmt.Sprintf("edit %d", i))
		last = mustPut(t, s, PutRequest{File: a, P1: last.ID(), Data: text})
	}
	b := mustNewFile(t, s, "y/notes")
	other := append([]byte(nil), text...)
	copy(other[100:], "the other file")
	mustPut(t, s, PutRequest{File: b, Data: other})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flipByte(t, filepath.Join(dir, "segments", segName(last.Seg)), int64(last.Off+recHeaderLen+2), 0x20)
	_, err := Repack(ctx, dir, RepackOptions{Jobs: 2})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Rev != last.ID() || !strings.HasPrefix(err.Error(), fmt.Sprintf("objstore: repack: revision %d of file %d:", last.Rev, last.File)) {
		t.Fatalf("repack: %v; want it to fail on %v, the revision with the bad record", err, last.ID())
	}
}

// TestVerifyBigRevisionsInAFile: verify rebuilds a big chunked fulltext,
// and the deltas of in-place writes on it, into a spill file, never in
// memory (a verify of a 512 MiB file peaked at 1.6 GB: 141 MiB now), and
// still finds a flipped byte in the big record, for it and the revision
// built on it.
func TestVerifyBigRevisionsInAFile(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f := mustNewFile(t, s, "big")
	data := bigMixed(11, bigFull+chunkSize+9)
	full := mustPut(t, s, PutRequest{File: f, Data: data})
	edited, d := inPlace(t, rand.New(rand.NewPCG(1, 1)), data, 4096)
	edit := mustPut(t, s, deltaOnly(f, full.ID(), d, len(edited)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	verify := func() (*Store, []Problem) {
		s, err := Open(dir, Config{CacheBytes: 1, LatestBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		var got []Problem
		if _, err := s.VerifyAll(ctx, func(p Problem) { got = append(got, p) }, nil); err != nil {
			t.Fatal(err)
		}
		return s, got
	}
	s, got := verify()
	if len(got) != 0 || s.rebuiltBytes.Load() != 0 {
		t.Errorf("verify: %v, %d bytes rebuilt in memory; want clean, none", got, s.rebuiltBytes.Load())
	}
	s.Close()
	flipByte(t, filepath.Join(dir, "segments", segName(full.Seg)), int64(full.Off+uint64(full.Stored)/2), 0x20)
	s, got = verify()
	s.Close()
	bad := map[index.RevID]bool{}
	for _, p := range got {
		bad[p.Rev] = errors.Is(p.Err, ErrCorrupt)
	}
	if len(bad) != 2 || !bad[full.ID()] || !bad[edit.ID()] {
		t.Errorf("verify after a flipped byte in %v: %v; want it and %v reported corrupt", full.ID(), got, edit.ID())
	}
}
