package mount

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSnapshotsFollowRandomOps applies random operations through a real
// mount and, every few steps, takes a snapshot and checks that it shows
// exactly the live tree of that moment (atimes aside: reading moves
// them). It exercises the dirty tracking of every kind of operation: a
// missed mark shows as a stale directory in a later snapshot.
func TestSnapshotsFollowRandomOps(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed+1), func(t *testing.T) { snapshotsFollow(t, seed+1) })
	}
}

// snapshotsFollow runs TestSnapshotsFollowRandomOps with one seed.
func snapshotsFollow(t *testing.T, seed uint64) {
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	store := filepath.Join(t.TempDir(), "store")
	l := start(t, store)
	m := l.mnt
	snaps := map[string]map[string]string{}
	for step := range 40 {
		for range 3 {
			randomMountOp(rng, m)
		}
		name := fmt.Sprintf("s%02d", step)
		want := captureTree(t, m, true)
		mustDo(t, os.Mkdir(m+"/.snapshots/"+name, 0o755))
		snaps[name] = want
		if got := captureTree(t, m+"/.snapshots/"+name, false); !sameTree(t, name, got, want) {
			t.Fatalf("step %d (seed %d): snapshot differs from the live tree", step, seed)
		}
	}
	for name, want := range snaps { // later changes left them alone
		sameTree(t, name+" later", captureTree(t, m+"/.snapshots/"+name, false), want)
	}
}

func randomMountOp(rng *rand.Rand, m string) {
	dirs, files := listTree(m)
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	d := pick(dirs)
	name := fmt.Sprintf("n%d", rng.IntN(40))
	switch rng.IntN(19) {
	case 0, 1:
		os.WriteFile(filepath.Join(d, name), fmt.Appendf(nil, "%d\n", rng.Int()), 0o644)
	case 2:
		os.Mkdir(filepath.Join(d, name), 0o755)
	case 3:
		if len(files) > 0 {
			f, err := os.OpenFile(pick(files), os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				fmt.Fprintf(f, "more %d\n", rng.Int())
				f.Close()
			}
		}
	case 4:
		if len(files) > 0 {
			os.Chmod(pick(files), os.FileMode(0o600+rng.IntN(0o177)))
		}
	case 5:
		if len(files) > 0 {
			os.Link(pick(files), filepath.Join(d, name))
		}
	case 6:
		if len(files) > 0 {
			os.Remove(pick(files))
		}
	case 7:
		if len(dirs) > 1 {
			os.Rename(pick(dirs[1:]), filepath.Join(d, name))
		}
	case 8:
		os.Symlink("target-"+name, filepath.Join(d, name))
	case 9:
		if len(files) > 0 {
			unix.Setxattr(pick(files), "user.k", fmt.Appendf(nil, "%d", rng.IntN(9)), 0)
		}
	case 10:
		if len(files) > 0 {
			os.Truncate(pick(files), int64(rng.IntN(4)))
		}
	case 11:
		if len(dirs) > 1 {
			os.Remove(pick(dirs[1:])) // only if empty
		}
	case 12:
		if len(files) > 0 {
			os.Rename(pick(files), filepath.Join(d, name))
		}
	case 13:
		if len(files) > 1 {
			os.Rename(pick(files), pick(files)) // over an existing file
		}
	case 14:
		if len(dirs) > 2 {
			unix.Renameat2(unix.AT_FDCWD, pick(dirs[1:]), unix.AT_FDCWD, pick(dirs[1:]), unix.RENAME_EXCHANGE)
		}
	case 15:
		if len(files) > 0 {
			ts := time.Unix(1_700_000_000+int64(rng.IntN(1000)), 0)
			os.Chtimes(pick(files), ts, ts)
		}
	case 16:
		if len(files) > 0 {
			os.Lchown(pick(files), rng.IntN(3)*1000, rng.IntN(3)*1000)
		}
	case 17:
		if len(files) > 0 {
			unix.Removexattr(pick(files), "user.k")
		}
	case 18: // own names: writing to a FIFO by a file's name would block
		syscall.Mkfifo(filepath.Join(d, "p"+name), 0o640)
	}
}

// listTree returns the directories (the root first) and regular files of
// the live tree at m.
func listTree(m string) (dirs, files []string) {
	filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == filepath.Join(m, ".snapshots") || p == filepath.Join(m, ".history") {
			return fs.SkipDir
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, p)
		case d.Type().IsRegular():
			files = append(files, p)
		}
		return nil
	})
	return dirs, files
}

// captureTree describes every node under root but its atime.
func captureTree(t *testing.T, root string, live bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	first := map[uint64]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatalf("walk %s: %v", p, err)
		}
		if live && (p == filepath.Join(root, ".snapshots") || p == filepath.Join(root, ".history")) {
			return fs.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		var st syscall.Stat_t
		mustDo(t, syscall.Lstat(p, &st))
		s := fmt.Sprintf("mode=%o uid=%d gid=%d size=%d nlink=%d mtime=%d ctime=%d", st.Mode, st.Uid, st.Gid, st.Size, st.Nlink, st.Mtim.Nano(), st.Ctim.Nano())
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			if f, ok := first[st.Ino]; ok {
				s += " link-of=" + f
			} else {
				first[st.Ino] = rel
			}
			b, err := os.ReadFile(p)
			mustDo(t, err)
			s += fmt.Sprintf(" sha=%x", sha256.Sum256(b))
			buf := make([]byte, 64)
			if n, err := unix.Getxattr(p, "user.k", buf); err == nil {
				s += " k=" + string(buf[:n])
			}
		case syscall.S_IFLNK:
			target, _ := os.Readlink(p)
			s += " -> " + target
		}
		out[rel] = s
		return nil
	})
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) bool {
	t.Helper()
	var bad []string
	for k, w := range want {
		if got[k] != w {
			bad = append(bad, fmt.Sprintf("%s:\n  got  %s\n  want %s", k, got[k], w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, "unexpected "+k)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("%s: %d differences\n%s", what, len(bad), strings.Join(bad[:min(len(bad), 8)], "\n"))
	}
	return len(bad) == 0
}
