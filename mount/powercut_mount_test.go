package mount

import (
	"bufio"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
	"github.com/deltafs/deltafs/internal/testutil/crashfs"
	"github.com/deltafs/deltafs/objstore"
)

// Environment of TestPowerCutMount: its number of rounds (default
// powerCutMountRounds; -short runs powerCutMountShortRounds) and its
// seed (default powerCutMountSeed).
const (
	envPowerCutRounds = "DELTAFS_POWERCUT_ROUNDS"
	envPowerCutSeed   = "DELTAFS_POWERCUT_SEED"
)

const (
	powerCutMountRounds      = 4
	powerCutMountShortRounds = 2
	powerCutMountSeed        = 2026
)

// TestPowerCutMount cuts the power under a whole running mount: the
// store (its index, segments, journal, id map and live tree) is on a
// crashfs mount (strict model: a file's data is durable at its fsync, a
// name at its directory's), a deltafs mount in a child process serves a
// mount point outside it, and TestCrashLoop's writers run in the mount,
// fsyncing by POSIX's rules what they expect to survive
// (crashWriters.powerCut). At a random moment the power is cut (crashfs
// Crash: every later change fails), the child is killed and its dead
// mount detached, and the disk is written out as a reboot would show it.
//
// Each round checks a copy of that image: a mount on it (which redoes
// what the journal left pending) must show every fsynced content (db,
// log, doc's last save, the moving file's last rewrite and move), and
// after its clean unmount every content acknowledged by an fsync of db
// and log must be a revision, every live file's newest revision its
// live content (the mount after the cut checks them all: unclean.go),
// the journal empty and the store verify clean. The next round mounts a
// new crashfs started from the image itself, unrecovered, so that its
// recovery runs on a disk the power may be cut under again: one
// round in three cuts it within 50 ms of the mount's readiness, while
// the redo of the last cut's pending files runs. Every other round tears
// the writes not yet synced (crashfs.Options.TornSeed). Rounds are
// deterministic in their seeds (logged), not in their timing.
func TestPowerCutMount(t *testing.T) {
	testutil.RequireFUSE(t)
	rounds := powerCutMountRounds
	if testing.Short() {
		rounds = powerCutMountShortRounds
	}
	rounds = testutil.EnvNumber(t, envPowerCutRounds, rounds)
	seed := testutil.EnvNumber(t, envPowerCutSeed, uint64(powerCutMountSeed))
	t.Logf("seed %d (%s), %d rounds (%s)", seed, envPowerCutSeed, rounds, envPowerCutRounds)
	start := time.Now()
	mnt := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// A round that fails leaves its killed mount there (the children's
	// cleanups kill them first).
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	w := newCrashWriters(rand.New(rand.NewPCG(seed, 0)).Uint64())
	w.powerCut = true
	var img string // the last cut's disk; "" before the first round
	check := ""    // the copy of it the round checks
	defer func() {
		if t.Failed() && check != "" {
			t.Logf("the disk after the cut:\n%s", listSizes(check))
		}
	}()
	var opened time.Duration // how long the last mount took to serve
	early, inOpen, redone, torn, acked, restarts := 0, 0, 0, 0, 0, 0
	for round := range rounds {
		r := rand.New(rand.NewPCG(seed, uint64(round)+1))
		var tornSeed uint64
		if round%2 == 1 {
			tornSeed = seed + uint64(round)
		}
		cfs := crashfs.MountT(t, crashfs.Options{From: img, TornSeed: tornSeed})
		store := filepath.Join(cfs.Dir(), "s.dfs")
		if round%3 == 2 && opened > 0 {
			// Inside the recovery: the store's open, the id map's and
			// the journal's, the redo queued.
			if cutDuringOpen(t, cfs, store, mnt, time.Duration(r.Int64N(int64(opened)))) {
				early++
			} else {
				inOpen++
			}
		} else {
			began := time.Now()
			c := startCrashChild(t, store, mnt)
			if round == 0 {
				// As in TestCrashLoop, the files get their history
				// first: a new file's fsyncs in its first moments are
				// held back (its grace; the journal, fsynced, makes
				// them durable) and are no revisions of their own,
				// which checkAgreement expects of every fsync of db
				// and log.
				w.setup(t, mnt)
				c.term(t)
				began = time.Now()
				c = startCrashChild(t, store, mnt)
			}
			opened = time.Since(began)
			// The cut comes after a few fsyncs of db and log returned
			// (up to 5 s: a slow machine, -race), and a random wait.
			want, d := 1+r.IntN(12), time.Duration(r.IntN(200))*time.Millisecond
			if round%3 == 1 {
				// Right after the recovery, the redo of what the
				// last cut left pending running beside the writers.
				want, d = 0, time.Duration(r.IntN(50))*time.Millisecond
				early++
			}
			wait := func() {
				for end := time.Now().Add(5 * time.Second); w.acks() < want && time.Now().Before(end); {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(d)
			}
			w.run(t, mnt, round, wait, func() {
				cfs.CrashT(t)
				killWait(t, c.Cmd, mnt)
			})
			// Only now: the dead mount fails the writers' calls
			// (ENOTCONN) until they stop, where the directory under it
			// would take their files.
			detachDead(t, mnt)
			acked += w.acks()
		}
		if st, err := cfs.Stats(); err == nil {
			torn += st.TornSectors
			t.Logf("round %d: %+v", round, st)
		}
		check = cfs.MaterializeT(t)
		img = cfs.MaterializeT(t) // the next round's disk, unrecovered
		// Every other round the machine restarts after the cut: the
		// mark names a boot before it, and the mount after the cut
		// hashes every live file instead of trusting its ctime.
		restarted := round%2 == 0 && restartedAfter(t, filepath.Join(check, "s.dfs"))
		if round%2 == 1 {
			restartedAfter(t, filepath.Join(img, "s.dfs"))
		}
		if _, err := cfs.Unmount(); err != nil {
			t.Fatalf("round %d: unmount crashfs: %v", round, err)
		}

		cstore := filepath.Join(check, "s.dfs")
		c := startCrashChild(t, cstore, mnt)
		w.checkDurable(t, mnt, round)
		c.term(t)
		redone += strings.Count(c.Stderr.String(), "left unrecorded")
		if !strings.Contains(c.Stderr.String(), "did not end cleanly") {
			t.Errorf("round %d: the mount after the cut did not check the live tree (the store was not marked mounted)", round)
		}
		if restarted && !strings.Contains(c.Stderr.String(), "restarted since") {
			t.Errorf("round %d: the mount after the cut and a restart did not hash the live tree", round)
		} else if restarted {
			restarts++
		}
		for _, l := range strings.Split(c.Stderr.String(), "\n") {
			if strings.Contains(l, "level=ERROR") {
				t.Errorf("round %d: the mount after the cut logged %s", round, l)
			}
		}
		// Every revision is read: the next round's store is the image,
		// whose revision numbers the check's redo does not share.
		checkAgreement(t, cstore, round, w, map[string]int{})
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", round, seed)
		}
	}
	t.Logf("%d rounds in %v: %d contents acknowledged by an fsync, %d cuts inside a mount's open, %d right after it, %d unsynced sectors kept by torn cuts, %d changes the cuts left unrecorded redone, %d checks after a restart",
		rounds, time.Since(start).Round(time.Millisecond), acked, inOpen, early, torn, redone, restarts)
	if acked == 0 {
		t.Fatalf("no fsync returned in %d rounds: the test exercised nothing", rounds)
	}
}

// restartedAfter makes the store's mark, if there is one, name a boot
// before this one, as after a restart, and reports whether it did.
func restartedAfter(t *testing.T, store string) bool {
	t.Helper()
	p := filepath.Join(store, mountedFile)
	if _, err := os.Lstat(p); err != nil {
		return false
	}
	if err := os.WriteFile(p, []byte("a boot before the cut"), 0o600); err != nil {
		t.Fatal(err)
	}
	return true
}

// listSizes lists the files under dir with their sizes, one a line.
func listSizes(dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "  %s: %v\n", rel, err)
		case d.IsDir():
			fmt.Fprintf(&b, "  %s/\n", rel)
		default:
			if fi, err := d.Info(); err == nil {
				fmt.Fprintf(&b, "  %s %d\n", rel, fi.Size())
			}
		}
		return nil
	})
	return b.String()
}

// cutDuringOpen starts a mount of store on mnt, cuts the power after
// wait, while it opens the store or just after it began to serve, kills
// it and detaches its mount if it made one; ready says whether it had
// said it serves.
func cutDuringOpen(t *testing.T, cfs *crashfs.FS, store, mnt string, wait time.Duration) (ready bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashChildEnv+"="+store+"\n"+mnt)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	said := make(chan bool, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		said <- l == "ready\n"
		io.Copy(io.Discard, out)
	}()
	time.Sleep(wait)
	cfs.CrashT(t)
	killWait(t, cmd, mnt)
	detachDead(t, mnt)
	return <-said
}

// killWait kills cmd, the mount child serving mnt, and reaps it. A child
// that has not exited 20 s after SIGKILL has a thread stuck in an
// uninterruptible wait; once, in 164 rounds, a cut inside a mount's open
// left one so. A power cut ends every process, whatever it waits for: so
// the FUSE connection of its own mount on mnt is aborted then (a thread
// waiting on its own server), with the threads' kernel stacks logged,
// and the test fails only if the child still does not exit.
func killWait(t *testing.T, cmd *exec.Cmd, mnt string) {
	t.Helper()
	cmd.Process.Kill()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(20 * time.Second):
	}
	stacks := threadStacks(cmd.Process.Pid)
	n, err := testutil.AbortFUSEMountedAt(mnt)
	t.Logf("the mount child %d had not exited 20 s after SIGKILL; aborted %d FUSE connection(s) on %s (%v); its threads were:\n%s", cmd.Process.Pid, n, mnt, err, stacks)
	select {
	case <-done:
		return
	case <-time.After(20 * time.Second):
	}
	t.Fatalf("the mount child %d has not exited 40 s after SIGKILL, 20 s after its mount's connection was aborted; its threads:\n%s", cmd.Process.Pid, threadStacks(cmd.Process.Pid))
}

// threadStacks returns the state and kernel stack of each thread of pid.
func threadStacks(pid int) string {
	var b strings.Builder
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	for _, task := range tasks {
		st, _ := os.ReadFile(filepath.Join(task, "stat"))
		stack, _ := os.ReadFile(filepath.Join(task, "stack"))
		fmt.Fprintf(&b, "%s\n%s\n", strings.TrimSpace(string(st)), stack)
	}
	return b.String()
}

// detachDead detaches the mount on mnt whose server was killed.
func detachDead(t *testing.T, mnt string) {
	t.Helper()
	if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL {
		t.Fatalf("detach the dead mount on %s: %v", mnt, err)
	}
}

// TestNewStoreSurvivesPowerCut: the first mount of a new store, made in
// a directory that does not exist yet, makes the store's directories
// durable in their parents before it serves: a file written, fsynced and
// named durably (its directory, the mount's root, fsynced) in the new
// mount is there after a power cut, and the store opens. makeStoreDir
// made them with os.MkdirAll and nothing fsynced their parents (objstore
// syncs only a directory it makes itself): the whole store, the file
// with it, was gone (the disk after the cut was empty).
func TestNewStoreSurvivesPowerCut(t *testing.T) {
	testutil.RequireFUSE(t)
	cfs := crashfs.MountT(t, crashfs.Options{})
	store := filepath.Join(cfs.Dir(), "new", "s.dfs")
	mnt := filepath.Join(t.TempDir(), "m")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	c := startCrashChild(t, store, mnt)
	if err := writeFileSync(filepath.Join(mnt, "f"), []byte("fsynced"), true); err != nil {
		t.Fatal(err)
	}
	if err := syncDir(mnt); err != nil {
		t.Fatal(err)
	}
	cfs.CrashT(t)
	c.Cmd.Process.Kill()
	c.Cmd.Wait()
	detachDead(t, mnt)
	img := cfs.MaterializeT(t)
	istore := filepath.Join(img, "new", "s.dfs")
	if b, err := os.ReadFile(filepath.Join(istore, liveDir, "f")); err != nil || string(b) != "fsynced" {
		t.Fatalf("the fsynced file after the power cut: %q, %v; the disk held:\n%s", b, err, listSizes(img))
	}
	st, err := objstore.Open(istore, objstore.Config{})
	if err != nil {
		t.Fatalf("open the store after the power cut: %v", err)
	}
	st.Close()
}
