package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// history is a deterministic multi-file history: merges whose better base
// is p2, identical revisions (dedups) and two files of the same name that
// start from the same text (a cross-file base).
type history struct {
	files int
	revs  int
	size  int
	texts map[index.RevID][]byte
}

func newHistory(files, revs, size int) *history {
	return &history{files: files, revs: revs, size: size, texts: map[index.RevID][]byte{}}
}

// parents returns rev's parents and the revision its text derives from.
func (h *history) parents(f index.FileID, rev index.Rev) (p1, p2, from index.RevID) {
	if rev == 0 {
		return index.NullRev, index.NullRev, index.NullRev
	}
	p1 = index.RevID{File: f, Rev: rev - 1}
	from = p1
	if rev%5 == 4 && rev >= 4 { // a merge whose content follows p2
		p2 = index.RevID{File: f, Rev: rev - 4}
		from = p2
	}
	return p1, p2, from
}

// text builds revision rev of file f (earlier revisions must exist).
func (h *history) text(f index.FileID, rev index.Rev) []byte {
	r := rand.New(rand.NewPCG(uint64(f), uint64(rev)+1000))
	_, _, from := h.parents(f, rev)
	switch {
	case from.IsNull() && f%2 == 0 && f > 1:
		// same start as file f-1, a few edits: the cross-file candidate wins
		first := h.texts[index.RevID{File: f - 1, Rev: 0}]
		return edit(r, first, 2)
	case from.IsNull():
		return genText(r, h.size)
	case rev%9 == 8:
		return bytes.Clone(h.texts[from]) // identical: a dedup
	}
	return edit(r, h.texts[from], 2)
}

func fileName(f index.FileID) string { return fmt.Sprintf("dir%d/doc.txt", (f+1)/2) }

// write puts the whole history into s.
func (h *history) write(t testing.TB, s *Store) {
	t.Helper()
	for i := 1; i <= h.files; i++ {
		f := mustNewFile(t, s, fileName(index.FileID(i)))
		for rev := index.Rev(0); int(rev) < h.revs; rev++ {
			p1, p2, _ := h.parents(f, rev)
			text := h.text(f, rev)
			h.texts[index.RevID{File: f, Rev: rev}] = text
			mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text), P1: p1, P2: p2})
		}
	}
}

// putNew opens the store in dir with cfg and puts a new revision of file
// f after its last one: size bytes of genText (seed), which no delta of
// the history's could be, so it is stored as a fulltext no repack chose.
func (h *history) putNew(t testing.TB, dir string, cfg Config, f index.FileID, seed uint64, size int) {
	t.Helper()
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := index.RevID{File: f, Rev: index.Rev(h.revs)}
	h.texts[id] = genText(rand.New(rand.NewPCG(seed, seed)), size)
	mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(h.texts[id]), P1: index.RevID{File: f, Rev: id.Rev - 1}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// check opens dir and checks every revision and Verify.
func (h *history) check(t testing.TB, dir string) {
	t.Helper()
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h.checkStore(t, s)
}

func (h *history) checkStore(t testing.TB, s *Store) {
	t.Helper()
	for id, want := range h.texts {
		got, err := s.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("%v: %v", id, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v reads back wrong", id)
		}
	}
	verifyClean(t, s)
}

// newHistoryStore writes a history with cfg and closes the store.
func newHistoryStore(t testing.TB, cfg Config, files, revs, size int) (*history, string) {
	t.Helper()
	h := newHistory(files, revs, size)
	s, dir := openNew(t, cfg)
	h.write(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return h, dir
}

func mustRepack(t testing.TB, dir string, opt RepackOptions) RepackReport {
	t.Helper()
	rep, err := Repack(context.Background(), dir, opt)
	if err != nil {
		t.Fatalf("repack: %v", err)
	}
	return rep
}

func TestRepackRoundTripPoorDeltas(t *testing.T) {
	// p1 only and a chain cap of 3: merges delta poorly, many fulltexts.
	h, dir := newHistoryStore(t, Config{P1Only: true, MaxChainLen: 3}, 4, 30, 16_000)
	rep := mustRepack(t, dir, RepackOptions{Reuse: ReuseNever, MaxChain: 32, Jobs: 1})
	t.Logf("%+v", rep)
	h.check(t, dir)
	if rep.Revisions != 120 || rep.Redeltaed+rep.Reused+rep.Unchanged != rep.Revisions {
		t.Errorf("counts do not add up: %+v", rep)
	}
	if rep.Reused != 0 {
		t.Errorf("reuse=never reused %d deltas", rep.Reused)
	}
	if float64(rep.StoredAfter) > 0.8*float64(rep.StoredBefore) || rep.SizeAfter > rep.SizeBefore {
		t.Errorf("not much smaller: stored %d -> %d, on disk %d -> %d", rep.StoredBefore, rep.StoredAfter, rep.SizeBefore, rep.SizeAfter)
	}
	if rep.ChainMaxAfter > 32 || rep.PeakRSS <= 0 || rep.Duration <= 0 || rep.Resumed {
		t.Errorf("report: %+v", rep)
	}
	for _, name := range []string{shadowName, doneName, oldSegsName} {
		if exists(filepath.Join(dir, name)) {
			t.Errorf("%s left behind", name)
		}
	}
	// The merges now delta against p2, file 2 starts from file 1.
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if e, _ := s.Entry(index.RevID{File: 1, Rev: 9}); e.Base != (index.RevID{File: 1, Rev: 5}) {
		t.Errorf("merge 9@1 stored against %v (%v), want its p2 5@1", e.Base, e.Kind)
	}
	if e, _ := s.Entry(index.RevID{File: 2, Rev: 0}); e.Base.File != 1 {
		t.Errorf("0@2 stored against %v (%v), want a revision of file 1", e.Base, e.Kind)
	}
	// New puts still work on the repacked store.
	f := index.FileID(1)
	text := edit(rand.New(rand.NewPCG(1, 1)), h.texts[index.RevID{File: f, Rev: 29}], 1)
	e := mustPut(t, s, PutRequest{File: f, Data: bytes.Clone(text), P1: index.RevID{File: f, Rev: 29}})
	if got := mustGet(t, s, e.ID()); !bytes.Equal(got, text) || e.Kind == index.KindFull {
		t.Errorf("put after repack: kind %v", e.Kind)
	}
}

// TestRepackAutoOnPoorDeltas: reuse=auto re-examines the large deltas of a
// poorly packed store (and its fulltexts) and keeps the small ones: it gets
// most of reuse=never's gain for a fraction of the work.
func TestRepackAutoOnPoorDeltas(t *testing.T) {
	h, dir := newHistoryStore(t, Config{P1Only: true, MaxChainLen: 3}, 4, 30, 16_000)
	dir2 := copyStore(t, dir)
	auto := mustRepack(t, dir, RepackOptions{MaxChain: 32, Jobs: 1})
	never := mustRepack(t, dir2, RepackOptions{MaxChain: 32, Jobs: 1, Reuse: ReuseNever})
	t.Logf("auto %+v", auto)
	t.Logf("never %+v", never)
	h.check(t, dir)
	if auto.Reused < auto.Revisions/3 || float64(auto.StoredAfter) > 1.3*float64(never.StoredAfter) ||
		float64(auto.StoredAfter) > 0.7*float64(auto.StoredBefore) {
		t.Errorf("auto: %d reused, %d bytes; never: %d bytes", auto.Reused, auto.StoredAfter, never.StoredAfter)
	}
}

func TestRepackReuseAuto(t *testing.T) {
	h, dir := newHistoryStore(t, Config{}, 2, 40, 24_000)
	auto := mustRepack(t, dir, RepackOptions{})
	h.check(t, dir)
	t.Logf("auto:  %+v", auto)
	never := mustRepack(t, dir, RepackOptions{Reuse: ReuseNever})
	h.check(t, dir)
	t.Logf("never: %+v", never)
	again := mustRepack(t, dir, RepackOptions{})
	h.check(t, dir)
	t.Logf("again: %+v", again)
	// Small deltas are kept verbatim: most revisions, without a rebuild.
	if auto.Reused < auto.Revisions/2 || auto.Redeltaed > auto.Revisions/4 {
		t.Errorf("reuse=auto reused %d and recomputed %d of %d", auto.Reused, auto.Redeltaed, auto.Revisions)
	}
	// never tries the existing base too (with a fresh delta): no worse.
	if never.Reused != 0 || never.Redeltaed+never.Unchanged != never.Revisions || float64(never.StoredAfter) > 1.01*float64(auto.StoredAfter) {
		t.Errorf("reuse=never: %+v", never)
	}
	// On a repacked store auto keeps nearly everything, within 1% in size.
	if again.Redeltaed*10 > again.Revisions || float64(again.StoredAfter) > 1.01*float64(never.StoredAfter) {
		t.Errorf("auto after never: %d recomputed, %d -> %d bytes", again.Redeltaed, never.StoredAfter, again.StoredAfter)
	}
}

// TestRepackDeterministic repacks copies of one store with one job, with
// more jobs than cores and with commits every few revisions: each must
// choose the same base, kind and record size for every revision. Poor
// deltas (p1 only, a chain cap of 3) leave many revisions that widen to
// the file's snapshots and to similar files (files 2k-1 and 2k share a
// name and a first text), whose choice once followed which job finished
// first.
func TestRepackDeterministic(t *testing.T) {
	const files = 6
	h, dir := newHistoryStore(t, Config{P1Only: true, MaxChainLen: 3}, files, 16, 8_000)
	runs := []RepackOptions{
		{Reuse: ReuseNever, MaxChain: 16, Jobs: 1},
		{Reuse: ReuseNever, MaxChain: 16, Jobs: 4},
		{Reuse: ReuseNever, MaxChain: 16, Jobs: 4, commitEvery: 3},
		{Reuse: ReuseNever, MaxChain: 16, Jobs: 3},
	}
	var want []string
	for i, opt := range runs {
		d := copyStore(t, dir)
		rep := mustRepack(t, d, opt)
		got := packLayout(t, d, files)
		if i == 0 {
			want = got
			t.Logf("jobs 1: %+v", rep)
			h.check(t, d)
			if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "0@2 ") && !strings.Contains(l, " null ") }) {
				t.Errorf("0@2 is not stored against file 1: %q", got[:16])
			}
			continue
		}
		if len(got) != len(want) {
			t.Fatalf("jobs %d: %d revisions, with one job %d", opt.Jobs, len(got), len(want))
		}
		for k, diffs := 0, 0; k < len(got) && diffs < 5; k++ {
			if got[k] != want[k] {
				diffs++
				t.Errorf("jobs %d, commitEvery %d (0: default): %s; with one job: %s", opt.Jobs, opt.commitEvery, got[k], want[k])
			}
		}
	}
}

// packLayout lists how each revision of the store in dir is stored.
func packLayout(t *testing.T, dir string, files int) []string {
	t.Helper()
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []string
	for f := index.FileID(1); int(f) <= files; f++ {
		err := s.Revisions(context.Background(), f, func(e index.Entry) error {
			base := "null"
			if !e.Base.IsNull() {
				base = e.Base.String()
			}
			out = append(out, fmt.Sprintf("%v %v %s %d bytes chain %d", e.ID(), e.Kind, base, e.Stored, e.ChainLen))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestRepackTighterCaps(t *testing.T) {
	h, dir := newHistoryStore(t, Config{NoCaps: true}, 2, 50, 16_000)
	rep := mustRepack(t, dir, RepackOptions{MaxChain: 5, MaxReadRatio: 1.5})
	if rep.ChainMaxBefore <= 5 || rep.ChainMaxAfter > 5 {
		t.Fatalf("chain max %d -> %d, want > 5 -> <= 5", rep.ChainMaxBefore, rep.ChainMaxAfter)
	}
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	caps := Caps{MaxChainLen: 5, MaxReadRatio: 1.5, MinReadBytes: DefaultMinReadBytes}
	for f := index.FileID(1); f <= 2; f++ {
		err := s.Revisions(context.Background(), f, func(e index.Entry) error {
			if e.ChainLen > 5 || e.Kind != index.KindDedup && e.ChainBytes > caps.readLimit(e.Size) {
				return fmt.Errorf("%v: chain %d, %d bytes for %d", e.ID(), e.ChainLen, e.ChainBytes, e.Size)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	h.checkStore(t, s)
}

func TestRepackRefusesLockedStore(t *testing.T) {
	_, dir := newHistoryStore(t, Config{}, 1, 3, 1000)
	cmd, stdin, _, first := startHelper(t, "hold-lock", dir)
	defer func() { stdin.Close(); cmd.Wait() }()
	if first != "locked" {
		t.Fatalf("helper said %q", first)
	}
	_, err := Repack(context.Background(), dir, RepackOptions{})
	var le *LockError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("repack of a locked store: %v", err)
	}
	if le.PID != fmt.Sprint(cmd.Process.Pid) || le.Holder != "/mnt/helper" {
		t.Errorf("lock error names pid %q holder %q, want %d and /mnt/helper", le.PID, le.Holder, cmd.Process.Pid)
	}
}

func TestRepackNotStore(t *testing.T) {
	if _, err := Repack(context.Background(), t.TempDir(), RepackOptions{}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("repack of an empty dir: %v", err)
	}
}

// TestRepackResumes interrupts a repack after its first commits and checks
// that the next run continues from there, and that other options start over.
func TestRepackResumes(t *testing.T) {
	h, dir := newHistoryStore(t, Config{P1Only: true, MaxChainLen: 4}, 3, 30, 8_000)
	interrupt := func(opt RepackOptions) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opt.Jobs, opt.commitEvery = 1, 7
		opt.Progress = func(p RepackProgress) {
			if p.Committed >= 20 {
				cancel()
			}
		}
		if _, err := Repack(ctx, dir, opt); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted repack: %v", err)
		}
		h.check(t, dir) // the live store is untouched and reads
	}
	interrupt(RepackOptions{Reuse: ReuseNever})
	other := mustRepack(t, dir, RepackOptions{Reuse: ReuseNever, Window: 3})
	if other.Resumed {
		t.Errorf("a repack with other options resumed: %+v", other)
	}
	interrupt(RepackOptions{Reuse: ReuseNever})
	leftOver := func() int64 {
		s, err := Open(dir, Config{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		n, err := s.InterruptedRepackBytes()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := leftOver(); n == 0 {
		t.Error("an interrupted repack's shadow not reported")
	}
	rep := mustRepack(t, dir, RepackOptions{Reuse: ReuseNever})
	if !rep.Resumed || rep.ResumedRevisions < 20 || rep.Redeltaed+rep.Unchanged+rep.ResumedRevisions != rep.Revisions {
		t.Errorf("did not resume: %+v", rep)
	}
	h.check(t, dir)
	if n := leftOver(); n != 0 {
		t.Errorf("%d bytes of a finished repack reported as left over", n)
	}
}

// TestOpenFinishesSwitch ends a repack's switch after each of its steps, as
// a crash would, and checks that Open completes it.
func TestOpenFinishesSwitch(t *testing.T) {
	for _, step := range []string{"marked", "copied", "swapped", "old-removed", "renamed"} {
		t.Run(step, func(t *testing.T) {
			h, dir := newHistoryStore(t, Config{P1Only: true, MaxChainLen: 3}, 2, 12, 4_000)
			crash := errors.New("crash")
			opt := RepackOptions{stopAt: func(s string) error {
				if s == step {
					return crash
				}
				return nil
			}}
			if _, err := Repack(context.Background(), dir, opt); !errors.Is(err, crash) {
				t.Fatalf("repack: %v", err)
			}
			h.check(t, dir)
			for _, name := range []string{shadowName, doneName, oldSegsName} {
				if exists(filepath.Join(dir, name)) {
					t.Errorf("%s left behind", name)
				}
			}
			ents, _ := os.ReadDir(filepath.Join(dir, segmentsName))
			if len(ents) == 0 {
				t.Errorf("no segments after the switch")
			}
		})
	}
}

// TestRepackMemoryLimit: a limit of a few texts shrinks the jobs, then the
// window, and the repack still completes correctly.
func TestRepackMemoryLimit(t *testing.T) {
	h, dir := newHistoryStore(t, Config{}, 2, 12, 20_000)
	var largest uint64
	for _, text := range h.texts {
		largest = max(largest, uint64(len(text)))
	}
	rep := mustRepack(t, dir, RepackOptions{Jobs: 2, Window: 10, MemoryLimit: int64(7 * largest)})
	if rep.Jobs != 1 || rep.Window != 7-textsPerJob {
		t.Errorf("limit of 7 texts: jobs %d window %d, want 1 and %d", rep.Jobs, rep.Window, 7-textsPerJob)
	}
	h.check(t, dir)
	for _, c := range []struct {
		texts, jobs    uint64
		wantJ, wantWin int
	}{{1, 2, 1, 1}, {10, 2, 2, 1}, {20, 2, 2, 6}, {100, 2, 2, 10}, {20, 8, 4, 1}} {
		rp := &repacker{opt: RepackOptions{Jobs: int(c.jobs), Window: 10, MemoryLimit: int64(c.texts * largest)}.withDefaults()}
		rp.fitMemory(largest)
		if rp.opt.Jobs != c.wantJ || rp.window != c.wantWin {
			t.Errorf("%d texts, %d jobs: got jobs %d window %d, want %d and %d", c.texts, c.jobs, rp.opt.Jobs, rp.window, c.wantJ, c.wantWin)
		}
	}
}

// TestRepackPastTheCap: a linear history longer than the chain cap gets an
// intermediate snapshot where the cap is reached, never a new fulltext, and
// reuse=never stores no more than the puts did.
func TestRepackPastTheCap(t *testing.T) {
	s, dir := openNew(t, Config{MaxChainLen: 16})
	r := rand.New(rand.NewPCG(31, 32))
	f := mustNewFile(t, s, "s1.txt")
	text := genText(r, 32<<10)
	var p1 index.RevID
	for range 60 {
		p1 = mustPut(t, s, PutRequest{File: f, Data: text, P1: p1}).ID()
		text = edit(r, text, 3)
	}
	s.Close()
	rep := mustRepack(t, dir, RepackOptions{Reuse: ReuseNever, MaxChain: 16})
	if rep.StoredAfter > rep.StoredBefore || rep.ChainMaxAfter > 16 {
		t.Errorf("past the cap: %+v", rep)
	}
	s, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(context.Background())
	if err != nil || st.ByKind["full"] != 1 || st.ByKind["intermediate"] == 0 {
		t.Fatalf("kinds after repack: %v (%v)", st.ByKind, err)
	}
	verifyClean(t, s)
}
