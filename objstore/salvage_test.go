package objstore

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// damagedStore makes a store with two files and damages it: f's first
// revision (f0, a fulltext under two deltas) gets a flipped byte, and
// the tail segment is cut inside g's second revision (g1). Its live
// tree, as LiveFile gives it, holds f0's content for f (so f0, and the
// deltas on it, can be brought back) and nothing for g (g1 is lost).
func damagedStore(t *testing.T) (dir string, f0, f1, f2, g0, g1 index.Entry, texts map[index.RevID][]byte, live func() (map[index.FileID]string, error)) {
	t.Helper()
	s, dir := openNew(t, Config{})
	f := mustNewFile(t, s, "f")
	g := mustNewFile(t, s, "g")
	a := bigMixed(1, 64<<10)
	a1 := append(bytes.Clone(a), "one more line\n"...)
	a2 := append(bytes.Clone(a1), "and another\n"...)
	b := bigMixed(2, 64<<10)
	b1 := append(bytes.Clone(b), "b's edit\n"...)
	f0 = mustPut(t, s, PutRequest{File: f, Data: a})
	f1 = mustPut(t, s, PutRequest{File: f, Data: a1, P1: f0.ID()})
	f2 = mustPut(t, s, PutRequest{File: f, Data: a2, P1: f1.ID()})
	g0 = mustPut(t, s, PutRequest{File: g, Data: b})
	g1 = mustPut(t, s, PutRequest{File: g, Data: b1, P1: g0.ID()})
	if f1.Kind == index.KindFull || f2.Kind == index.KindFull || g1.Kind == index.KindFull {
		t.Fatalf("setup: want deltas, got %v %v %v", f1.Kind, f2.Kind, g1.Kind)
	}
	texts = map[index.RevID][]byte{f0.ID(): a, f1.ID(): a1, f2.ID(): a2, g0.ID(): b, g1.ID(): b1}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "segments", segName(f0.Seg))
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	raw[f0.Off+uint64(f0.Stored)/2] ^= 0xff
	raw = raw[:g1.Off+10]
	if err := os.WriteFile(seg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	livef := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(livef, a, 0o644); err != nil {
		t.Fatal(err)
	}
	live = func() (map[index.FileID]string, error) { return map[index.FileID]string{f: livef}, nil }
	return dir, f0, f1, f2, g0, g1, texts, live
}

// TestSalvage: a salvage brings back what a live file still holds (and
// the revisions built on it), keeps what nothing holds as lost, and
// leaves a store that verifies clean, that gc and repack run on, and
// that records on: where gc and repack refused the damaged store for
// good.
func TestSalvage(t *testing.T) {
	ctx := context.Background()
	dir, f0, f1, f2, g0, g1, texts, live := damagedStore(t)
	if _, err := Repack(ctx, dir, RepackOptions{}); err == nil {
		t.Fatal("repack of the damaged store succeeded")
	}
	dry, err := Salvage(ctx, dir, SalvageOptions{LiveFiles: live, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Damaged != 4 || dry.Recovered != 3 || dry.FromLive != 1 || dry.Lost != 1 || len(dry.LostRevisions) != 1 || dry.LostRevisions[0] != (LostRev{File: g1.File, Rev: g1.Rev}) || dry.Repack != nil {
		t.Fatalf("dry run: %+v", dry)
	}
	if _, err := Repack(ctx, dir, RepackOptions{}); err == nil {
		t.Fatal("the dry run changed the store: repack now succeeds")
	}
	rep, err := Salvage(ctx, dir, SalvageOptions{LiveFiles: live})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged != 4 || rep.Recovered != 3 || rep.Lost != 1 || rep.Repack == nil {
		t.Fatalf("salvage: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, damageFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mark of damage after a salvage: %v", err)
	}
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []index.Entry{f0, f1, f2, g0} {
		if got, err := s.Get(ctx, e.ID()); err != nil || !bytes.Equal(got, texts[e.ID()]) {
			t.Errorf("revision %v after the salvage: %d bytes, %v", e.ID(), len(got), err)
		}
	}
	_, err = s.Get(ctx, g1.ID())
	var lost *LostError
	if !errors.Is(err, ErrLost) || !errors.Is(err, ErrCorrupt) || !errors.As(err, &lost) || lost.Lost != g1.ID() {
		t.Errorf("the lost revision reads as %v, want ErrLost", err)
	}
	if e, err := s.Entry(g1.ID()); err != nil || !e.Lost() || e.Size != g1.Size || e.Hash != g1.Hash || e.P1 != g0.ID() {
		t.Errorf("the lost revision's entry: %+v, %v", e, err)
	}
	sum, err := s.VerifyAll(ctx, func(p Problem) { t.Errorf("verify after the salvage: %v", p) }, nil)
	if err != nil || sum.Lost != 1 || sum.Problems != 0 {
		t.Errorf("verify after the salvage: %+v, %v", sum, err)
	}
	// The file goes on after its lost revision, and nothing dedups
	// against the lost one: the same content is stored anew.
	g2 := mustPut(t, s, PutRequest{File: g0.File, Data: texts[g1.ID()], P1: g1.ID()})
	if g2.Kind == index.KindDedup || g2.Rev != g1.Rev+1 {
		t.Errorf("a put of the lost revision's content after it: %+v", g2)
	}
	if got := mustGet(t, s, g2.ID()); !bytes.Equal(got, texts[g1.ID()]) {
		t.Error("the put after the lost revision reads back wrong")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() error{
		"gc": func() error {
			both := func() (map[index.FileID]bool, error) { return map[index.FileID]bool{f0.File: true, g0.File: true}, nil }
			_, err := GC(ctx, dir, GCOptions{Live: both}) // live files keep their histories
			return err
		},
		"repack": func() error { _, err := Repack(ctx, dir, RepackOptions{Reuse: ReuseNever}); return err },
	} {
		if err := run(); err != nil {
			t.Fatalf("%s after the salvage: %v", name, err)
		}
	}
	s, err = Open(dir, Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := s.Entry(g1.ID()); err != nil || !e.Lost() {
		t.Errorf("the lost revision after gc and repack: %+v, %v", e, err)
	}
	sum, err = s.VerifyAll(ctx, func(p Problem) { t.Errorf("verify after gc and repack: %v", p) }, nil)
	if err != nil || sum.Lost != 1 {
		t.Errorf("verify after gc and repack: %+v, %v", sum, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Salvage(ctx, dir, SalvageOptions{LiveFiles: live})
	if err != nil || again.Damaged != 0 || again.Repack != nil {
		t.Errorf("a second salvage: %+v, %v", again, err)
	}
}

// TestSalvageFindsContentThroughABroughtBackChain: a damaged revision
// whose content another damaged revision holds, once that one reads
// again through a text brought back from a live file, is brought back
// from it, not kept as lost (a review: it was skipped as a source
// because it had no found text of its own).
func TestSalvageFindsContentThroughABroughtBackChain(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f := mustNewFile(t, s, "f")
	g := mustNewFile(t, s, "g")
	a := bigMixed(1, 64<<10)
	a1 := append(bytes.Clone(a), "one more line\n"...)
	f0 := mustPut(t, s, PutRequest{File: f, Data: a})
	mustPut(t, s, PutRequest{File: f, Data: a1, P1: f0.ID()})
	mustDo(t, s.Close())
	flipRecordByte(t, dir, f0)
	s, err := Open(dir, Config{})
	mustDo(t, err)
	g0 := mustPut(t, s, PutRequest{File: g, Data: a1}) // f1 does not read: no dedup, a record of its own
	mustDo(t, s.Close())
	if g0.Kind == index.KindDedup {
		t.Fatal("setup: g0 is a dedup")
	}
	flipRecordByte(t, dir, g0)
	// A bad record with no mark of damage: gc and repack fail on it,
	// pointing to salvage (a review: they named the record only).
	if _, err := Repack(ctx, dir, RepackOptions{}); err == nil || !strings.Contains(err.Error(), "deltafs salvage STORE") {
		t.Errorf("repack of a store with a bad record: %v", err)
	}
	livef := filepath.Join(t.TempDir(), "f")
	mustDo(t, os.WriteFile(livef, a, 0o644))
	live := func() (map[index.FileID]string, error) { return map[index.FileID]string{f: livef}, nil }
	rep, err := Salvage(ctx, dir, SalvageOptions{LiveFiles: live})
	if err != nil || rep.Damaged != 3 || rep.Lost != 0 || rep.FromOther != 1 {
		t.Fatalf("salvage: %+v, %v", rep, err)
	}
	s, err = Open(dir, Config{ReadOnly: true})
	mustDo(t, err)
	defer s.Close()
	if got, err := s.Get(ctx, g0.ID()); err != nil || !bytes.Equal(got, a1) {
		t.Fatalf("g0 after the salvage: %d bytes, %v", len(got), err)
	}
}

// flipRecordByte flips a byte in the middle of e's record.
func flipRecordByte(t *testing.T, dir string, e index.Entry) {
	t.Helper()
	seg := filepath.Join(dir, "segments", segName(e.Seg))
	raw, err := os.ReadFile(seg)
	mustDo(t, err)
	raw[e.Off+uint64(e.Stored)/2] ^= 0xff
	mustDo(t, os.WriteFile(seg, raw, 0o600))
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSalvageBringsBackAnInPlaceWrite: a file's newest revision stored
// from an in-place write's delta alone (no content hash) whose record is
// cut off comes back from the live file, which has its size and has not
// changed since its content was read (the rule the mount trusts to name
// a file's newest revision); it was kept as lost, and snapshots naming
// it failed (a review). An older such revision cannot be told from the
// live file and stays lost.
func TestSalvageBringsBackAnInPlaceWrite(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f := mustNewFile(t, s, "f")
	r := rand.New(rand.NewPCG(3, 3))
	text := bigMixed(5, 64<<10)
	t1, d1 := inPlace(t, r, text, 100)
	t2, d2 := inPlace(t, r, t1, 100)
	livef := filepath.Join(t.TempDir(), "f")
	mustDo(t, os.WriteFile(livef, t2, 0o644)) // written before the revisions read it
	time.Sleep(50 * time.Millisecond)
	e0 := mustPut(t, s, PutRequest{File: f, Data: text})
	e1 := mustPut(t, s, deltaOnly(f, e0.ID(), d1, len(t1)))
	e2 := mustPut(t, s, deltaOnly(f, e1.ID(), d2, len(t2)))
	if e2.Flags&index.FlagHashDeferred == 0 {
		t.Fatal("setup: the in-place revision has a hash")
	}
	mustDo(t, s.Close())
	seg := filepath.Join(dir, "segments", segName(e1.Seg))
	mustDo(t, os.Truncate(seg, int64(e1.Off)+5)) // e1 and e2 cut off
	live := func() (map[index.FileID]string, error) { return map[index.FileID]string{f: livef}, nil }
	rep, err := Salvage(ctx, dir, SalvageOptions{LiveFiles: live})
	if err != nil || rep.Damaged != 2 || rep.Recovered != 1 || rep.Lost != 1 || rep.LostRevisions[0].Rev != e1.Rev || rep.Rerecorded != 0 {
		t.Fatalf("salvage: %+v, %v", rep, err)
	}
	s, err = Open(dir, Config{ReadOnly: true})
	mustDo(t, err)
	defer s.Close()
	if got, err := s.Get(ctx, e2.ID()); err != nil || !bytes.Equal(got, t2) {
		t.Fatalf("the in-place revision after the salvage: %d bytes, %v", len(got), err)
	}
}

// TestSalvageTakesAFoundDedupAsSource: a revision whose copy (a dedup of
// it) came back from the copy's live file is brought back from that
// text: it was kept as lost, the dedup being in no hash row (a review).
func TestSalvageTakesAFoundDedupAsSource(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	a, b := mustNewFile(t, s, "a"), mustNewFile(t, s, "b")
	text := bigMixed(6, 64<<10)
	a0 := mustPut(t, s, PutRequest{File: a, Data: text})
	b0 := mustPut(t, s, PutRequest{File: b, Data: text, P2: a0.ID()})
	if b0.Kind != index.KindDedup {
		t.Fatalf("setup: the copy is %v, not a dedup", b0.Kind)
	}
	mustPut(t, s, PutRequest{File: a, Data: bigMixed(7, 64<<10), P1: a0.ID()})
	mustDo(t, s.Close())
	flipRecordByte(t, dir, a0)
	liveb := filepath.Join(t.TempDir(), "b")
	mustDo(t, os.WriteFile(liveb, text, 0o644))
	live := func() (map[index.FileID]string, error) { return map[index.FileID]string{b: liveb}, nil }
	rep, err := Salvage(ctx, dir, SalvageOptions{LiveFiles: live})
	if err != nil || rep.Lost != 0 || rep.Recovered != 2 {
		t.Fatalf("salvage: %+v, %v", rep, err)
	}
	s, err = Open(dir, Config{ReadOnly: true})
	mustDo(t, err)
	defer s.Close()
	for _, id := range []index.RevID{a0.ID(), b0.ID()} {
		if got, err := s.Get(ctx, id); err != nil || !bytes.Equal(got, text) {
			t.Errorf("%v after the salvage: %d bytes, %v", id, len(got), err)
		}
	}
}

// TestSalvageAgainRecordsWhatAKilledOneLeft: a salvage stopped after its
// switch and before recording the live files whose newest revision it
// kept as lost leaves them to the next salvage, which found nothing
// damaged and did nothing (a review: verify failed on them until a
// mount's snapshot).
func TestSalvageAgainRecordsWhatAKilledOneLeft(t *testing.T) {
	ctx := context.Background()
	dir, _, _, _, g0, g1, texts, live := damagedStore(t)
	if _, err := Salvage(ctx, dir, SalvageOptions{}); err != nil { // as if killed before the live files
		t.Fatal(err)
	}
	liveg := filepath.Join(t.TempDir(), "g")
	mustDo(t, os.WriteFile(liveg, append(bytes.Clone(texts[g1.ID()]), "more\n"...), 0o644))
	both := func() (map[index.FileID]string, error) {
		m, err := live()
		m[g0.File] = liveg
		return m, err
	}
	rep, err := Salvage(ctx, dir, SalvageOptions{LiveFiles: both})
	if err != nil || rep.Damaged != 0 || rep.Rerecorded != 2 { // f (all lost without its live file) and g
		t.Fatalf("the second salvage: %+v, %v", rep, err)
	}
	s, err := Open(dir, Config{ReadOnly: true})
	mustDo(t, err)
	defer s.Close()
	if e, ok, err := s.Latest(g0.File); err != nil || !ok || e.Lost() || e.Rev != g1.Rev+1 {
		t.Fatalf("g's newest revision after the second salvage: %+v, %v", e, err)
	}
}
