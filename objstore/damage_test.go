package objstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
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
}
