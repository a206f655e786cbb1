package objstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/internal/testutil/crashfs"
)

// envPowerCutRounds sets TestPowerCut's number of rounds (default
// powerCutRounds; -short runs powerCutShortRounds).
const envPowerCutRounds = "DELTAFS_POWERCUT_ROUNDS"

const (
	powerCutRounds      = 12
	powerCutShortRounds = 3
)

// TestPowerCut opens a new store on a crashfs mount (strict model: only
// what was fsynced survives, a name only once its directory was fsynced),
// runs writers and snapshots in goroutines, cuts the power at a random
// moment, and opens the store again from what the disk held: it must
// open, every acknowledged put and snapshot must be there with its
// bytes, Verify must be clean, and a new put must work. Rounds are
// deterministic in their seeds, not in their timing.
func TestPowerCut(t *testing.T) {
	rounds := powerCutRounds
	if testing.Short() {
		rounds = powerCutShortRounds
	}
	rounds = testutil.EnvNumber(t, envPowerCutRounds, rounds)
	chain := testutil.EnvNumber(t, envPowerCutChain, powerCutChain)
	if chain < 1 {
		t.Fatalf("%s=%d: want a count of rounds", envPowerCutChain, chain)
	}
	start := time.Now()
	total, openCuts, torn := 0, 0, 0
	var img string // the previous round's disk, or "": a new store
	acks := &powerCutAcks{}
	for round := range rounds {
		if round%chain == 0 {
			openCuts, torn = openCuts+acks.openCuts, torn+acks.torn
			img, acks = "", &powerCutAcks{snaps: map[string]index.RevID{}}
		}
		before := acks.n()
		img = powerCutRound(t, round, img, acks)
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
		total += acks.n() - before
	}
	if total < rounds {
		t.Errorf("only %d acknowledged operations over %d rounds: the loop did not exercise much", total, rounds)
	}
	openCuts, torn = openCuts+acks.openCuts, torn+acks.torn
	// (Whether a cut finds unsynced pages to tear is timing: a loaded
	// machine may have none at each cut. TestTornWrites checks the
	// tearing itself.)
	t.Logf("%d rounds, %d acknowledged operations, %d cuts inside an open, %d unsynced sectors kept, %v", rounds, total, openCuts, torn, time.Since(start))
}

// envPowerCutChain sets how many rounds run on one store (default
// powerCutChain): each after the first starts from the previous round's
// disk, so that the power is cut again during or soon after a recovery
// (the index's logs replayed and badger flushing them, the segments'
// tail cut), and what earlier rounds acknowledged must survive it.
const envPowerCutChain = "DELTAFS_POWERCUT_CHAIN"

const powerCutChain = 3

// powerCutAcks are the operations the store acknowledged.
type powerCutAcks struct {
	mu    sync.Mutex
	revs  []ack
	snaps map[string]index.RevID // snapshot name -> the revision it holds
	// open is how long the helper's last open took; openCuts counts
	// the cuts that came before the helper was ready.
	open     time.Duration
	openCuts int
	torn     int // unsynced sectors the cuts kept
}

func (a *powerCutAcks) n() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.revs) + len(a.snaps)
}

// powerCutRound runs one round: the store is written by a helper
// process, which the power cut kills (SIGKILL right after crashfs's
// Crash): a process does not outlive a power cut, and a store left open
// on a dead disk would keep retrying its writes (badger's flush) for
// ever.
//
// A round that starts from a previous round's disk cuts the power, one
// time in two, while the helper is still opening the store: inside its
// recovery (the index's logs replayed, the segments' torn tails cut),
// at a random moment before the time the last open took. Every other
// round tears the writes not yet synced (crashfs.Options.TornSeed):
// some reach the disk, in part, as a disk's unfinished writeback
// leaves them.
func powerCutRound(t *testing.T, round int, from string, acks *powerCutAcks) string {
	r := rand.New(rand.NewPCG(2026, uint64(round)))
	var torn uint64 // every other round, unsynced writes survive in part
	if round%2 == 1 {
		torn = uint64(round)
	}
	fsys := crashfs.MountT(t, crashfs.Options{From: from, TornSeed: torn})
	dir := filepath.Join(fsys.Dir(), "store")
	// Small segments, so that rounds roll to new segment files.
	t.Setenv(envPowerCutSegment, fmt.Sprint(16<<10+r.IntN(64<<10)))
	t.Setenv(envPowerCutRound, fmt.Sprint(round))
	inOpen := from != "" && acks.open > 0 && r.IntN(2) == 0
	began := time.Now()
	cmd, _, out := startHelperNoWait(t, "powercut", dir)
	acked := acks.n()
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var f, rev, h uint64
			var name string
			if sc.Text() == "ready" {
				close(ready)
			} else if _, err := fmt.Sscanf(sc.Text(), "ok %d %d %d", &f, &rev, &h); err == nil {
				acks.mu.Lock()
				acks.revs = append(acks.revs, ack{id: index.RevID{File: index.FileID(f), Rev: index.Rev(rev)}, hash: h})
				acks.mu.Unlock()
			} else if _, err := fmt.Sscanf(sc.Text(), "snap %s %d %d", &name, &f, &rev); err == nil {
				acks.mu.Lock()
				acks.snaps[name] = index.RevID{File: index.FileID(f), Rev: index.Rev(rev)}
				acks.mu.Unlock()
			}
			// else: a line torn by the kill
		}
	}()

	if inOpen {
		time.Sleep(time.Duration(r.Int64N(int64(acks.open))))
		select {
		case <-ready:
		default:
			acks.openCuts++
		}
	} else {
		select {
		case <-ready:
			acks.open = time.Since(began)
		case <-done:
			cmd.Wait()
			t.Fatalf("round %d: the helper stopped before it was ready", round)
		}
		// Cut the power after a random number of acknowledgements (0:
		// at once, during the writers' first puts) plus a random wait.
		want := acked + r.IntN(12)
		for deadline := time.Now().Add(20 * time.Second); acks.n() < want && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
	}
	fsys.CrashT(t)
	cmd.Process.Kill()
	<-done
	cmd.Wait()
	if st, err := fsys.Stats(); err == nil {
		acks.torn += st.TornSectors
	}

	img := fsys.MaterializeT(t)
	// The next round starts from the disk as the power cut left it, not
	// as the check leaves it.
	next := t.TempDir()
	if err := os.CopyFS(next, os.DirFS(img)); err != nil {
		t.Fatal(err)
	}
	checkPowerCut(t, round, filepath.Join(img, "store"), acks)
	return next
}

// The helper's segment size, and the round (its snapshots' names).
const (
	envPowerCutSegment = "OBJSTORE_POWERCUT_SEGMENT"
	envPowerCutRound   = "OBJSTORE_POWERCUT_ROUND"
)

// helperPowerCut opens the store in dir (creating it and its files if
// new), says "ready" and runs a writer of each of crashFiles files and a
// snapshot taker until killed, printing "ok FILE REV HASH" for each put
// and "snap NAME FILE REV" for each snapshot once they return.
func helperPowerCut(dir string) error {
	seg, err := strconv.Atoi(os.Getenv(envPowerCutSegment))
	if err != nil {
		return err
	}
	s, err := Open(dir, Config{Create: true, SegmentSize: int64(seg)})
	if err != nil {
		return err
	}
	if _, err := s.File(1); errors.Is(err, ErrNotFound) {
		if ids, err := s.NewFiles([]string{"1", "2", "3"}); err != nil || len(ids) != crashFiles || ids[0] != 1 {
			return fmt.Errorf("new files: %v, %v", ids, err)
		}
	}
	round := os.Getenv(envPowerCutRound)
	var mu sync.Mutex // stdout's lines, and newest
	var newest index.RevID
	say := func(id index.RevID, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format, args...)
		if id.File != 0 {
			newest = id
		}
	}
	fmt.Println("ready")
	errc := make(chan error, crashFiles+1)
	for f := index.FileID(1); f <= crashFiles; f++ {
		go func() { errc <- powerCutWriter(s, f, say) }()
	}
	go func() {
		for i := 0; ; i++ {
			time.Sleep(3 * time.Millisecond)
			mu.Lock()
			id := newest
			mu.Unlock()
			if id.File == 0 {
				continue
			}
			name := fmt.Sprintf("r%ss%d", round, i)
			if err := powerCutSnapshot(s, name, i, id); err != nil {
				errc <- err
				return
			}
			say(index.RevID{}, "snap %s %d %d\n", name, id.File, id.Rev)
		}
	}()
	return <-errc
}

// powerCutWriter puts revisions of file f until a put fails (the power
// is cut).
func powerCutWriter(s *Store, f index.FileID, say func(index.RevID, string, ...any)) error {
	m, err := s.File(f)
	if err != nil {
		return err
	}
	for rev := index.Rev(m.Revs); ; rev++ {
		req := PutRequest{File: f, Data: crashContent(f, rev)}
		if rev > 0 {
			req.P1 = index.RevID{File: f, Rev: rev - 1}
		}
		if rev%7 == 6 {
			req.P2 = index.RevID{File: f, Rev: rev - 3}
		}
		e, err := s.Put(context.Background(), req)
		if err != nil {
			return err
		}
		say(e.ID(), "ok %d %d %d\n", f, e.Rev, e.Hash)
	}
}

// powerCutSnapshot takes snapshot name of a tree holding revision id.
func powerCutSnapshot(s *Store, name string, i int, id index.RevID) error {
	tr := &index.Tree{Entries: []index.TreeEntry{{Name: "f", Mode: 0o100644, Nlink: 1, Rev: id}}}
	b, h, err := tr.Encode()
	if err != nil {
		return err
	}
	_, err = s.CreateSnapshot(context.Background(), SnapshotRequest{
		Name:  name,
		Time:  time.Unix(int64(i), 0),
		Root:  index.TreeEntry{Mode: 0o40755, Nlink: 2, Tree: h},
		Trees: map[index.TreeHash][]byte{h: b},
	})
	return err
}

// checkPowerCut opens the store in the image of the disk after the cut
// and checks what it acknowledged.
func checkPowerCut(t *testing.T, round int, dir string, acks *powerCutAcks) {
	t.Helper()
	var logs bytes.Buffer
	s, err := Open(dir, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("round %d: open after the power cut (%d puts, %d snapshots acknowledged): %v\n%s\nthe disk held:\n%s",
			round, len(acks.revs), len(acks.snaps), err, logs.String(), listTree(filepath.Dir(dir)))
	}
	defer s.Close()
	ctx := context.Background()
	for _, a := range acks.revs {
		got, err := s.Get(ctx, a.id)
		if err != nil {
			t.Fatalf("round %d: acknowledged %v lost: %v", round, a.id, err)
		}
		if !bytes.Equal(got, crashContent(a.id.File, a.id.Rev)) || s.cfg.hash(got) != a.hash {
			t.Fatalf("round %d: acknowledged %v reads back wrong", round, a.id)
		}
	}
	for name, id := range acks.snaps {
		sn, err := s.Snapshot(name)
		if err != nil {
			t.Fatalf("round %d: acknowledged snapshot %s lost: %v", round, name, err)
		}
		tr, err := s.Tree(sn.Root.Tree)
		if err != nil || len(tr.Entries) != 1 || tr.Entries[0].Rev != id {
			t.Fatalf("round %d: snapshot %s: tree %v, %v; want %v", round, name, tr, err, id)
		}
	}
	checkCommitted(t, s, round)
	// The store takes new writes.
	f, err := s.NewFile("after")
	if err != nil {
		t.Fatalf("round %d: new file after the power cut: %v", round, err)
	}
	if _, err := s.Put(ctx, PutRequest{File: f, Data: []byte("after the power cut\n")}); err != nil {
		t.Fatalf("round %d: put after the power cut: %v", round, err)
	}
}

// listTree lists the files under dir with their sizes, one a line.
func listTree(dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			fmt.Fprintf(&b, "  %s/\n", rel)
		} else if fi, err := d.Info(); err == nil {
			fmt.Fprintf(&b, "  %s %d\n", rel, fi.Size())
		}
		return nil
	})
	return b.String()
}
