package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/objstore"
)

// The crash test runs each mount in a child process (this test binary,
// re-executed with crashChildEnv set), so that it can SIGKILL it.
const crashChildEnv = "DELTAFS_CRASH_CHILD" // "STORE\nMOUNTPOINT"

func TestMain(m *testing.M) {
	if v := os.Getenv(crashChildEnv); v != "" {
		os.Exit(crashChild(v))
	}
	os.Exit(m.Run())
}

// crashChild serves one mount until SIGTERM; "ready" on stdout when it
// serves, log lines on stderr. Every fsync of a file with history
// returns after its revision is recorded (no fsync interval).
func crashChild(v string) int {
	store, mnt, _ := strings.Cut(v, "\n")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := Run(ctx, Config{
		Store: store, MountPoint: mnt, FsyncInterval: time.Nanosecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Ready:  func(*Mounted) { fmt.Println("ready") },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mount:", err)
		return 1
	}
	return 0
}

type crashChildProc struct {
	*testutil.Proc
}

func startCrashChild(t *testing.T, store, mnt string) *crashChildProc {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashChildEnv+"="+store+"\n"+mnt)
	return &crashChildProc{testutil.StartReady(t, cmd, 60*time.Second, nil, func(l string) bool { return l == "ready\n" })}
}

// term unmounts cleanly and checks the exit.
func (c *crashChildProc) term(t *testing.T) {
	t.Helper()
	c.Cmd.Process.Signal(syscall.SIGTERM)
	if err := c.Cmd.Wait(); err != nil {
		t.Fatalf("mount child: %v; stderr %s", err, c.Stderr)
	}
}

// TestCrashLoop: writers run in the mount (in-place writes with fsync,
// appends with fsync, close-only rewrites, new files, an editor's atomic
// save, a file moved back and forth) for a random time, the mount is
// SIGKILLed, mounted again and unmounted cleanly, and then: every
// fsynced content is intact, every revision acknowledged by an fsync
// reads back identical, every live file's newest revision equals its
// live content (the redo recorded what the kill left unrecorded), the
// journal is empty and the store verifies clean.
func TestCrashLoop(t *testing.T) {
	testutil.RequireFUSE(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DELTAFS_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (DELTAFS_CRASH_SEED replays the contents and kill times; the interleaving is the machine's)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	store, mnt := filepath.Join(dir, "s.dfs"), filepath.Join(dir, "m")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	w := newCrashWriters(rng.Uint64())
	c := startCrashChild(t, store, mnt)
	w.setup(t, mnt)
	c.term(t)
	acked := map[string]int{} // revisions of db and log checked so far
	redone := 0
	const rounds = 12
	for round := range rounds {
		c = startCrashChild(t, store, mnt)
		d := time.Duration(100+rng.IntN(600)) * time.Millisecond
		w.run(t, mnt, round, func() { time.Sleep(d) }, func() {
			c.Cmd.Process.Kill()
			c.Cmd.Wait()
		})
		for _, l := range strings.Split(c.Stderr.String(), "\n") {
			if strings.Contains(l, "level=ERROR") {
				t.Errorf("round %d: the killed mount logged %s", round, l)
			}
		}
		c = startCrashChild(t, store, mnt)
		w.checkDurable(t, mnt, round)
		c.term(t)
		redone += strings.Count(c.Stderr.String(), "left unrecorded")
		for _, l := range strings.Split(c.Stderr.String(), "\n") {
			if strings.Contains(l, "level=ERROR") {
				t.Errorf("round %d: the remount logged %s", round, l)
			}
		}
		checkAgreement(t, store, round, w, acked)
	}
	t.Logf("%d rounds; the remounts recorded %d changes the kills left unrecorded", rounds, redone)
	if redone == 0 {
		t.Fatalf("no kill left a change unrecorded in %d rounds: the test exercised nothing", rounds)
	}
}

// crashWriters keeps what the writers know was made durable.
type crashWriters struct {
	seed uint64
	// powerCut: the writers make durable, by POSIX's rules, what the
	// checks expect to survive a power cut (TestPowerCutMount): setup
	// fsyncs its files and directories, a save of doc fsyncs the
	// directory after its rename, and the moving file is fsynced after
	// each rewrite and its directory after each move. Without it they
	// rely on the page cache, which a killed process leaves intact.
	powerCut bool

	mu sync.Mutex
	// db: a 64 KiB file written in place a page at a time, fsynced
	// after every write; log: appended to, fsynced after every append.
	db, log         []byte // content at the last fsync that returned
	dbTry, logTry   []byte // content if the write after it landed
	dbOff           int
	ackedDB, ackLog map[uint64]bool // hashes of fsync-acknowledged contents
	// doc: saved by writing doc.tmp, fsyncing it and renaming it over.
	doc, docTry []byte
	// mv/a and mv/b: one file moved back and forth, rewritten between.
	mvName, mvTry string
	mv, mvData    []byte
}

func newCrashWriters(seed uint64) *crashWriters {
	return &crashWriters{seed: seed, ackedDB: map[uint64]bool{}, ackLog: map[uint64]bool{}}
}

// setup creates the files with a first revision each.
func (w *crashWriters) setup(t *testing.T, mnt string) {
	w.db, w.log, w.doc = testutil.Bytes(w.seed, 64<<10), []byte("log\n"), testutil.Bytes(w.seed+1, 30_000)
	w.mv, w.mvName = []byte("moving"), "mv/a"
	os.Mkdir(filepath.Join(mnt, "mv"), 0o755)
	os.Mkdir(filepath.Join(mnt, "new"), 0o755)
	for name, b := range map[string][]byte{"db": w.db, "log": w.log, "doc": w.doc, "mv/a": w.mv} {
		if err := writeFileSync(filepath.Join(mnt, name), b, w.powerCut); err != nil {
			t.Fatal(err)
		}
	}
	if w.powerCut {
		for _, d := range []string{"mv", "new", "."} {
			if err := syncDir(filepath.Join(mnt, d)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// writeFileSync is os.WriteFile, with an fsync before the close if sync.
func writeFileSync(name string, data []byte, sync bool) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs the directory dir (its entries).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// acks counts the contents of db and log acknowledged by an fsync since
// the last checkAgreement.
func (w *crashWriters) acks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ackedDB) + len(w.ackLog)
}

// run runs the writers until wait returns, then calls kill and waits for
// them to stop.
func (w *crashWriters) run(t *testing.T, mnt string, round int, wait, kill func()) {
	os.Remove(filepath.Join(mnt, "doc.tmp")) // a save the last kill cut short
	var killed atomic.Bool
	var wg sync.WaitGroup
	writers := []func(*rand.Rand) error{
		func(r *rand.Rand) error { return w.runDB(mnt, r) },
		func(r *rand.Rand) error { return w.runLog(mnt, r) },
		func(r *rand.Rand) error { return w.runDoc(mnt, r) },
		func(r *rand.Rand) error { return w.runMove(mnt, r) },
		func(r *rand.Rand) error { return runRewrites(mnt, round, r) },
	}
	for i, f := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f(rand.New(rand.NewPCG(w.seed, uint64(round*10+i))))
			if !killed.Load() {
				t.Errorf("round %d: writer %d failed before the kill: %v", round, i, err)
			}
		}()
	}
	wait()
	killed.Store(true)
	kill()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("round %d: writers still running 30 s after the kill", round)
	}
}

// runDB writes 4 KiB pages in place, fsyncing after each; now and then it
// closes and reopens the file.
func (w *crashWriters) runDB(mnt string, r *rand.Rand) error {
	p := filepath.Join(mnt, "db")
	for {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		for range 1 + r.IntN(10) {
			off, page := r.IntN(16)*4096, randBytes(r, 4096)
			w.mu.Lock()
			try := bytes.Clone(w.db)
			copy(try[off:], page)
			w.dbTry, w.dbOff = try, off
			w.mu.Unlock()
			if _, err := f.WriteAt(page, int64(off)); err != nil {
				f.Close()
				return err
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			w.mu.Lock()
			w.db, w.dbTry = try, nil
			w.ackedDB[xxhash.Sum64(try)] = true
			w.mu.Unlock()
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
}

// runLog appends and fsyncs.
func (w *crashWriters) runLog(mnt string, r *rand.Rand) error {
	f, err := os.OpenFile(filepath.Join(mnt, "log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		b := randBytes(r, 1+r.IntN(3000))
		w.mu.Lock()
		w.logTry = append(bytes.Clone(w.log), b...)
		w.mu.Unlock()
		if _, err := f.Write(b); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		w.mu.Lock()
		w.log, w.logTry = w.logTry, nil
		w.ackLog[xxhash.Sum64(w.log)] = true
		w.mu.Unlock()
	}
}

// runDoc saves doc as an editor does: a small edit written to doc.tmp,
// fsynced, renamed over doc.
func (w *crashWriters) runDoc(mnt string, r *rand.Rand) error {
	p, tmp := filepath.Join(mnt, "doc"), filepath.Join(mnt, "doc.tmp")
	for {
		w.mu.Lock()
		next := bytes.Clone(w.doc)
		w.mu.Unlock()
		off := r.IntN(len(next) - 100)
		copy(next[off:], randBytes(r, 100))
		w.mu.Lock()
		w.docTry = next
		w.mu.Unlock()
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		_, err = f.Write(next)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
		if w.powerCut {
			if err := syncDir(mnt); err != nil {
				return err
			}
		}
		w.mu.Lock()
		w.doc, w.docTry = next, nil
		w.mu.Unlock()
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
	}
}

// runMove rewrites the moving file and moves it between mv/a and mv/b.
func (w *crashWriters) runMove(mnt string, r *rand.Rand) error {
	for {
		w.mu.Lock()
		from := w.mvName
		w.mu.Unlock()
		to := map[string]string{"mv/a": "mv/b", "mv/b": "mv/a"}[from]
		data := randBytes(r, 1+r.IntN(20_000))
		w.mu.Lock()
		w.mvData = data
		w.mu.Unlock()
		if err := writeFileSync(filepath.Join(mnt, from), data, w.powerCut); err != nil {
			return err
		}
		w.mu.Lock()
		w.mv, w.mvTry = data, to
		w.mu.Unlock()
		if err := os.Rename(filepath.Join(mnt, from), filepath.Join(mnt, to)); err != nil {
			return err
		}
		if w.powerCut {
			if err := syncDir(filepath.Join(mnt, "mv")); err != nil {
				return err
			}
		}
		w.mu.Lock()
		w.mvName, w.mvTry = to, ""
		w.mu.Unlock()
	}
}

// runRewrites rewrites three notes wholesale and creates new files, all
// close-only (no fsync).
func runRewrites(mnt string, round int, r *rand.Rand) error {
	for i := 0; ; i++ {
		name := fmt.Sprintf("note%d", r.IntN(3))
		if i%4 == 0 {
			name = fmt.Sprintf("new/r%d-%d", round, i)
		}
		if err := os.WriteFile(filepath.Join(mnt, name), randBytes(r, r.IntN(50_000)), 0o644); err != nil {
			return err
		}
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkDurable checks, through the remounted tree, that every fsynced
// content survived the kill, and takes up the live state as the model.
func (w *crashWriters) checkDurable(t *testing.T, mnt string, round int) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(mnt, name))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		return b
	}
	db := read("db")
	if !bytes.Equal(db, w.db) && (w.dbTry == nil || !bytes.Equal(db, w.dbTry)) {
		t.Fatalf("round %d: db lost fsynced content", round)
	}
	w.db = db
	lg := read("log")
	if !bytes.HasPrefix(lg, w.log) || len(lg) > max(len(w.log), len(w.logTry)) {
		t.Fatalf("round %d: log of %d bytes, fsynced %d", round, len(lg), len(w.log))
	}
	for i := len(w.log); i < len(lg); i++ {
		if lg[i] != 0 && lg[i] != w.logTry[i] {
			t.Fatalf("round %d: log byte %d is neither the unsynced append nor a hole", round, i)
		}
	}
	w.log = lg
	doc := read("doc")
	if !bytes.Equal(doc, w.doc) && (w.docTry == nil || !bytes.Equal(doc, w.docTry)) {
		t.Fatalf("round %d: doc is neither the last save nor the one in progress", round)
	}
	w.doc = doc
	a, errA := os.ReadFile(filepath.Join(mnt, "mv/a"))
	b, errB := os.ReadFile(filepath.Join(mnt, "mv/b"))
	mv := a
	switch {
	case errA == nil && errB == nil, errA != nil && errB != nil:
		t.Fatalf("round %d: mv/a (%v) and mv/b (%v): want exactly one", round, errA, errB)
	case errA == nil:
		w.mvName = "mv/a"
	default:
		w.mvName, mv = "mv/b", b
	}
	// After a kill, a rewrite cut short may have left any prefix of its
	// data (O_TRUNC, then the write); after a power cut the rewrite is
	// durable at its fsync, whole, or the last one is.
	if w.powerCut && !bytes.Equal(mv, w.mv) && !bytes.Equal(mv, w.mvData) {
		t.Fatalf("round %d: %s (%d bytes) is neither the last fsynced rewrite (%d bytes) nor the one in progress (%d bytes)", round, w.mvName, len(mv), len(w.mv), len(w.mvData))
	}
	w.mv = mv
	w.dbTry, w.logTry, w.docTry, w.mvTry = nil, nil, nil, ""
}

// checkAgreement opens the unmounted store: the journal is empty, every
// live file's newest revision is its live content, every acknowledged
// content of db and log is a revision, and the store verifies clean.
//
// After a power cut (w.powerCut) that holds of every live file too,
// whatever the cut kept of it: the mount after the cut found the store
// marked mounted (unclean.go) and checked every live file against its
// history, so that a content the disk kept without a durable journal
// record naming it (a write whose fsync did not return: the mount
// fsyncs the live file before it puts the revision; the kernel's
// writeback of a file never fsynced) is recorded too. (Before that
// check such a content stayed out of the history until the file
// changed again.)
func checkAgreement(t *testing.T, store string, round int, w *crashWriters, checked map[string]int) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(store, journalFile)); err != nil || len(b) != 0 {
		t.Errorf("round %d: journal after a clean unmount: %d bytes, %v", round, len(b), err)
	}
	if _, err := os.Lstat(filepath.Join(store, mountedFile)); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("round %d: %s after a clean unmount: %v", round, mountedFile, err)
	}
	st, err := objstore.Open(store, objstore.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ids := storeIDs(t, store)
	live := filepath.Join(store, liveDir)
	files := map[string]index.FileID{}
	err = filepath.WalkDir(live, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(live, p)
		f, ok := ids[liveID(p)]
		if !ok {
			if len(data) > 0 {
				t.Errorf("round %d: %s (%d bytes) has no history", round, rel, len(data))
			}
			return nil
		}
		files[rel] = f
		if text, _ := lastRevision(t, st, f); !bytes.Equal(text, data) {
			t.Errorf("round %d: %s: newest revision (%d bytes) is not the live content (%d bytes)", round, rel, len(text), len(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, acked := range map[string]map[uint64]bool{"db": w.ackedDB, "log": w.ackLog} {
		have := map[uint64]bool{}
		err := st.Revisions(context.Background(), files[name], func(e index.Entry) error {
			if int(e.Rev) < checked[name] {
				return nil
			}
			text, err := st.Get(context.Background(), e.ID())
			have[xxhash.Sum64(text)] = true
			checked[name] = int(e.Rev) + 1
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for h := range acked {
			if !have[h] {
				t.Fatalf("round %d: %s: a content whose fsync returned is in no revision (%d acknowledged, %d revisions read)", round, name, len(acked), len(have))
			}
		}
		clear(acked)
	}
	bad, err := st.Verify(context.Background(), func(p objstore.Problem) { t.Errorf("round %d: verify: %v", round, p) })
	if err != nil || bad != 0 {
		t.Fatalf("round %d: verify: %d bad revisions, %v", round, bad, err)
	}
}
