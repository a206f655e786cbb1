package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
)

// The store on a small loop filesystem of its own, filled by writing
// through the mount (index/space.go, mount/space.go): nothing may crash,
// the writer gets ENOSPC, the mount keeps serving, and the changes it
// could not record are recorded once there is room again, in the same
// mount or the next.

const fullFSSize = 160 << 20

// smallFiles is how many small files the tests keep rewriting, and
// fullRounds how many times once the disk is full.
const (
	smallFiles = 40
	fullRounds = 40
)

// fullDisk is a mount whose store sits on a loop filesystem.
type fullDisk struct {
	fsys, store, mnt string
	p                *mountProc
}

func newFullDisk(t *testing.T) *fullDisk {
	t.Helper()
	testutil.RequireFUSE(t)
	d := &fullDisk{fsys: testutil.LoopFS(t, fullFSSize)}
	d.store = filepath.Join(d.fsys, "work.dfs")
	d.mnt = mkdir(t, t.TempDir(), "work")
	d.p = startMount(t, d.store, d.mnt)
	return d
}

// writeSmall writes round r of the small files; it returns how many
// writes failed with ENOSPC (other errors fail t).
func (d *fullDisk) writeSmall(t *testing.T, r int) int {
	refused := 0
	for i := range smallFiles {
		err := os.WriteFile(filepath.Join(d.mnt, fmt.Sprintf("f%02d", i)), fmt.Appendf(nil, "round %d of file %d\n", r, i), 0o644)
		switch {
		case errors.Is(err, syscall.ENOSPC):
			refused++
		case err != nil:
			t.Errorf("round %d: %v", r, err)
			return refused
		}
	}
	return refused
}

// snapshot makes a snapshot through the mount: it waits until what was
// reported (and queued: a redo) is recorded.
func (d *fullDisk) snapshot(t *testing.T, name string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(d.mnt, ".snapshots", name), 0o755); err != nil {
		t.Fatalf("snapshot %s: %v; mount stderr %q", name, err, d.p.Stderr.String())
	}
}

// fill writes a big file through the mount until ENOSPC while the small
// files are rewritten and recorded, then rewrites them a few more times
// on the full disk. It checks that the writer got ENOSPC and that the
// mount lives and serves reads.
func (d *fullDisk) fill(t *testing.T) {
	t.Helper()
	d.writeSmall(t, 0)
	d.snapshot(t, "before")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := 1; ; r++ {
			select {
			case <-stop:
				return
			default:
			}
			d.writeSmall(t, r)
		}
	})
	werr := writeUntilFull(filepath.Join(d.mnt, "big"))
	close(stop)
	wg.Wait()
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("filling the disk through the mount: %v, want ENOSPC", werr)
	}
	// Rewrites on the full disk, two contents in turn: revisions that
	// dedup against the one before last write index rows and no segment
	// data, which is what used to fault (a store into a hole of badger's
	// memory-mapped log).
	refused := 0
	for r := 1000; r < 1000+fullRounds; r++ {
		refused += d.writeSmall(t, r%2)
	}
	d.alive(t)
	t.Logf("small writes refused with ENOSPC on the full disk: %d of %d", refused, fullRounds*smallFiles)
	b, err := os.ReadFile(filepath.Join(d.mnt, ".snapshots", "before", "f07"))
	if err != nil || string(b) != "round 0 of file 7\n" {
		t.Errorf("read of a snapshot on the full disk: %q, %v", b, err)
	}
	if _, err := os.ReadFile(filepath.Join(d.mnt, "f07")); err != nil {
		t.Errorf("read of a live file on the full disk: %v", err)
	}
	waitFor(t, d.p, "recording paused")
}

// writeUntilFull writes 1 MiB blocks to a new file at p until a write
// fails, and returns that error (or close's).
func writeUntilFull(p string) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for n := 0; ; n++ {
		if n > 2*fullFSSize>>20 {
			f.Close()
			return fmt.Errorf("wrote %d MiB to a %d MiB filesystem", n, fullFSSize>>20)
		}
		if _, err = f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	return err
}

// alive fails t if the mount process has exited.
func (d *fullDisk) alive(t *testing.T) {
	t.Helper()
	if err := d.p.Cmd.Process.Signal(syscall.Signal(0)); err != nil || d.p.Cmd.ProcessState != nil {
		t.Fatalf("the mount process died: %v; stderr %q", err, d.p.Stderr.String())
	}
	if _, err := os.Stat(filepath.Join(d.mnt, "f00")); err != nil {
		t.Fatalf("the mount does not serve: %v; stderr %q", err, d.p.Stderr.String())
	}
}

// waitFor waits up to 30 s for the mount's stderr to say want.
func waitFor(t *testing.T, p *mountProc, want string) {
	t.Helper()
	waitUpTo(t, p, want, 30*time.Second)
}

// waitLong is waitFor for up to 2 minutes.
func waitLong(t *testing.T, p *mountProc, want string) {
	t.Helper()
	waitUpTo(t, p, want, 2*time.Minute)
}

// waitUpTo waits up to d for the mount's stderr to say want.
func waitUpTo(t *testing.T, p *mountProc, want string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); !strings.Contains(p.Stderr.String(), want); {
		if time.Now().After(end) {
			t.Fatalf("the mount did not say %q; stderr %q", want, p.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOneLine fails t if a command's stderr is not one line or tells
// of a fault.
func checkOneLine(t *testing.T, what string, r result) {
	t.Helper()
	if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 || strings.Contains(r.stderr, "SIGBUS") || strings.Contains(r.stderr, "goroutine") {
		t.Errorf("%s: exit %d, stderr not one line: %q", what, r.code, r.stderr)
	}
}

// verifyClean runs verify on target and wants it clean with nothing left
// unrecorded.
func verifyClean(t *testing.T, target string) {
	t.Helper()
	r := runBinary(t, nil, "verify", target)
	if r.code != 0 || !strings.Contains(r.stdout, ": clean") || strings.Contains(r.stdout, "not recorded") {
		t.Fatalf("verify %s: exit %d, stdout %q, stderr %q", target, r.code, r.stdout, r.stderr)
	}
}

// stopMount stops the mount with SIGTERM and returns its exit code.
func (d *fullDisk) stopMount(t *testing.T) int {
	t.Helper()
	d.p.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.p.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		d.p.Cmd.Process.Kill()
		t.Fatal("the mount process did not exit")
	}
	return d.p.Cmd.ProcessState.ExitCode()
}

// TestFullDiskRecoversInMount fills the disk through the mount, frees it
// with rm, and checks that the same mount records what it could not.
func TestFullDiskRecoversInMount(t *testing.T) {
	d := newFullDisk(t)
	d.fill(t)
	if err := os.Remove(filepath.Join(d.mnt, "big")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, d.p, "has room again")
	d.alive(t)
	d.writeSmall(t, 2000) // writes work again, and record
	d.snapshot(t, "after")
	verifyClean(t, d.mnt)
	if code := d.stopMount(t); code != 0 {
		t.Fatalf("mount exit %d; stderr %q", code, d.p.Stderr.String())
	}
	verifyClean(t, d.store)
	checkNewest(t, d.store, "f07", "round 2000 of file 7\n")
}

// checkNewest wants the newest revision of name in store to be want.
func checkNewest(t *testing.T, store, name, want string) {
	t.Helper()
	r := runBinary(t, nil, "cat", "--store", store, name)
	if r.code != 0 || r.stdout != want {
		t.Errorf("cat %s: exit %d, %q (want %q), %q", name, r.code, r.stdout, want, r.stderr)
	}
}

// TestFullDiskUnmountedFull unmounts while the disk is full: the mount
// says it left the index to be replayed, offline commands on the full
// store fail with one line, and once space is freed the next mount
// records what was pending.
func TestFullDiskUnmountedFull(t *testing.T) {
	d := newFullDisk(t)
	d.fill(t)
	code := d.stopMount(t)
	checkNoFault(t, "mount", d.p.Stderr.String())
	t.Logf("mount exit %d on a full disk; stderr %q", code, d.p.Stderr.String())
	offlineOnFull(t, d.store)
	if err := os.Remove(filepath.Join(d.store, "live", "big")); err != nil {
		t.Fatal(err)
	}
	d.p = startMount(t, d.store, d.mnt)
	d.snapshot(t, "after") // waits for the redo of what was pending
	if code := d.stopMount(t); code != 0 {
		t.Fatalf("mount exit %d; stderr %q", code, d.p.Stderr.String())
	}
	verifyClean(t, d.store)
	// the last round, written on the full disk, is recorded
	live, err := os.ReadFile(filepath.Join(d.store, "live", "f07"))
	if err != nil {
		t.Fatal(err)
	}
	checkNewest(t, d.store, "f07", string(live))
	if string(live) != "round 1 of file 7\n" {
		t.Logf("f07's last write on the full disk was refused: %q", live)
	}
}

// TestFullDiskOffline fills the store's filesystem from outside, with
// the store unmounted and closed cleanly: the commands that must write
// the index refuse with one line, exit 1, and the store is intact after.
func TestFullDiskOffline(t *testing.T) {
	d := newFullDisk(t)
	d.writeSmall(t, 0)
	if code := d.stopMount(t); code != 0 {
		t.Fatalf("mount exit %d; stderr %q", code, d.p.Stderr.String())
	}
	filler := filepath.Join(d.fsys, "filler")
	if err := writeUntilFull(filler); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the disk: %v", err)
	}
	if r := runBinary(t, nil, "stats", d.store); r.code != 0 {
		t.Errorf("stats (read-only) on a full disk: exit %d, %q", r.code, r.stderr)
	}
	offlineOnFull(t, d.store)
	r := refusedMount(t, d.store, d.mnt)
	if r.code != 1 || !strings.Contains(r.stderr, "no space left on device") {
		t.Errorf("mount on a full disk: exit %d, stderr %q", r.code, r.stderr)
	}
	checkOneLine(t, "mount", r)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	verifyClean(t, d.store)
}

// offlineOnFull runs commands that write the index on a store whose
// filesystem is full: each fails with one line, exit 1.
func offlineOnFull(t *testing.T, store string) {
	t.Helper()
	for _, args := range [][]string{{"snapshot", "create", store, "offline"}, {"verify", store}, {"gc", store}} {
		r := runBinary(t, nil, args...)
		what := strings.Join(args[:len(args)-1], " ")
		if args[0] == "snapshot" {
			what = "snapshot create"
		}
		checkOneLine(t, what, r)
		if r.code != 1 || !strings.Contains(r.stderr, "no space left on device") {
			t.Errorf("%s on a full disk: exit %d, stderr %q", what, r.code, r.stderr)
		}
	}
}

// checkNoFault fails t if stderr tells of a fault.
func checkNoFault(t *testing.T, what, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "SIGBUS") || strings.Contains(stderr, "fatal error") {
		t.Fatalf("%s crashed: %q", what, stderr)
	}
}

// refusedMount runs a mount that should refuse at once; one that mounts
// instead is stopped after a while, not waited for for ever.
func refusedMount(t *testing.T, store, mnt string, flags ...string) result {
	t.Helper()
	cmd := exec.Command(binary, append(append([]string{"mount"}, flags...), store, mnt)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		t.Fatalf("mount %v did not refuse: stdout %q, stderr %q", flags, out.String(), errOut.String())
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// TestFullDiskBigFileWaitsForSpace: a big file whose recording the store
// refuses although the index has its reserve (the file's own data fills
// the rest) is not retried in a loop: recording resumes when space is
// freed, or after a backoff of seconds. It was retried every half second
// for ever (a review: 4 s of CPU and 1.2 GB written per 10 s).
func TestFullDiskBigFileWaitsForSpace(t *testing.T) {
	d := newFullDisk(t)
	d.writeSmall(t, 0)
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.fsys, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	big := noise(int(free / 2)) // its put needs all of it and the reserve
	if err := os.WriteFile(filepath.Join(d.mnt, "big"), big, 0o644); err != nil {
		t.Fatalf("write %d bytes with %d free: %v", len(big), free, err)
	}
	waitLong(t, d.p, "recording paused") // a put of half the disk, under -race on a loaded machine
	time.Sleep(3 * time.Second)          // within the first backoff, nothing freed
	if n := strings.Count(d.p.Stderr.String(), "has room again"); n != 0 {
		t.Fatalf("recording resumed %d times with no space freed; stderr %q", n, d.p.Stderr.String())
	}
	d.alive(t)
	if err := os.Remove(filepath.Join(d.mnt, "big")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, d.p, "has room again")
	d.writeSmall(t, 1)
	d.snapshot(t, "after")
	verifyClean(t, d.mnt)
}

// TestRestoreRefusedWithoutRoom: a restore whose revision would not fit
// on the store's file system beside the room to record it is refused
// before it writes anything, mounted and offline, and the live file
// keeps its content. One that ran out midway left the file half
// overwritten, or (offline) rewritten and never recorded, which verify
// then reported for ever (a user review).
func TestRestoreRefusedWithoutRoom(t *testing.T) {
	d := newFullDisk(t)
	f := d.bigThenSmall(t, "f", noise(40<<20), 40<<20)
	d.leaveFree(t, 30<<20)
	check := func(how string, r result, live string) {
		t.Helper()
		checkOneLine(t, how, r)
		if r.code == 0 || !strings.Contains(r.stderr, "no space left on device") {
			t.Errorf("%s: exit %d, stderr %q; want a refusal for want of space", how, r.code, r.stderr)
		}
		if b, err := os.ReadFile(live); err != nil || string(b) != "small now\n" {
			t.Errorf("%s: the live file holds %d bytes, %v; want it as it was", how, len(b), err)
		}
	}
	check("mounted", runBinary(t, nil, "restore", f, "--rev", "0"), f)
	if code := d.stopMount(t); code != 0 {
		t.Fatalf("mount exit %d; stderr %q", code, d.p.Stderr.String())
	}
	check("offline", runBinary(t, nil, "restore", "--store", d.store, "f", "--rev", "0"), filepath.Join(d.store, "live", "f"))
	if err := os.Remove(filepath.Join(d.fsys, "filler")); err != nil {
		t.Fatal(err)
	}
	verifyClean(t, d.store)
}

// TestSparseRestoreWithLittleRoom: the room a restore needs counts the
// blocks it writes, not the revision's length: a 30 MiB disk image
// holding 1 MiB of data is restored with 25 MiB free (a review: the
// check counted its length and refused it).
func TestSparseRestoreWithLittleRoom(t *testing.T) {
	d := newFullDisk(t)
	data := noise(1 << 20)
	img := d.bigThenSmall(t, "img", data, 30<<20)
	d.leaveFree(t, 25<<20)
	if r := runBinary(t, nil, "restore", img, "--rev", "0"); r.code != 0 {
		t.Fatalf("restore: exit %d, stderr %q", r.code, r.stderr)
	}
	want := append(data, make([]byte, 30<<20-len(data))...)
	if b, err := os.ReadFile(img); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("the restored image: %d bytes, equal %v, %v", len(b), bytes.Equal(b, want), err)
	}
}

// noise is n bytes that do not compress (a seeded ChaCha8 stream: the
// multiplicative pattern it replaced compressed in some runs, and a big
// file's recording then fitted on the disk).
func noise(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

// bigThenSmall writes data to name in the mount, extended to size bytes
// (a hole), then, past the new-file grace, "small now\n" over it, and
// checks that both are revisions; it returns the file's path.
func (d *fullDisk) bigThenSmall(t *testing.T, name string, data []byte, size int64) string {
	t.Helper()
	p := writeFile(t, d.mnt, name, data)
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	writeFile(t, d.mnt, name, []byte("small now\n"))
	if r := runBinary(t, nil, "log", p); r.code != 0 || strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("log: exit %d, %q, %q; want two revisions", r.code, r.stdout, r.stderr)
	}
	return p
}

// leaveFree writes a file beside the store, not through the mount, that
// leaves n bytes free on its file system.
func (d *fullDisk) leaveFree(t *testing.T, n int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.fsys, &st); err != nil {
		t.Fatal(err)
	}
	writeFile(t, d.fsys, "filler", make([]byte, int64(st.Bavail)*st.Bsize-n))
}
