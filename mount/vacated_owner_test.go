package mount

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A history goes on from one file to the next at a path only between
// files of one owner: a file's .history is its owner's to read, and
// another user's new file made where a private file was just removed, or
// renamed over one, showed the old file's revisions to its owner (a
// review with two users in an --allow-other mount). Files of one owner
// still continue (the control).
func TestHistoryContinuesOnlyForTheSameOwner(t *testing.T) {
	const other = 65534 // nobody
	for _, tc := range []struct {
		name    string
		owner   int // of the new file
		replace func(t *testing.T, mnt string, write func(name string, owner int))
	}{
		{"removed then made again, other owner", other, func(t *testing.T, mnt string, write func(string, int)) {
			if err := os.Remove(filepath.Join(mnt, "key")); err != nil {
				t.Fatal(err)
			}
			write("key", other)
		}},
		{"renamed over, other owner", other, func(t *testing.T, mnt string, write func(string, int)) {
			write("tmp", other)
			if err := os.Rename(filepath.Join(mnt, "tmp"), filepath.Join(mnt, "key")); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed then made again, same owner", 0, func(t *testing.T, mnt string, write func(string, int)) {
			if err := os.Remove(filepath.Join(mnt, "key")); err != nil {
				t.Fatal(err)
			}
			write("key", 0)
		}},
		{"renamed over, same owner", 0, func(t *testing.T, mnt string, write func(string, int)) {
			write("tmp", 0)
			if err := os.Rename(filepath.Join(mnt, "tmp"), filepath.Join(mnt, "key")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "s.dfs")
			l := start(t, store)
			if err := os.WriteFile(filepath.Join(l.mnt, "key"), []byte("secret of user 0\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			l.recorded(t, 1)
			write := func(name string, owner int) {
				f, err := os.OpenFile(filepath.Join(l.mnt, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Chown(owner, owner); err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(fmt.Sprintf("new file of user %d\n", owner)); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			tc.replace(t, l.mnt, write)
			l.recorded(t, 2)
			l.stop(t)
			var histories [][]string
			for _, revs := range contents(t, store) {
				var h []string
				for _, r := range revs {
					h = append(h, string(r))
				}
				histories = append(histories, h)
			}
			slices.SortFunc(histories, func(a, b []string) int { return len(b) - len(a) })
			newText := fmt.Sprintf("new file of user %d\n", tc.owner)
			var want [][]string
			if tc.owner == 0 {
				want = [][]string{{"secret of user 0\n", newText}}
			} else {
				want = [][]string{{"secret of user 0\n"}, {newText}}
				if histories[0][0] != want[0][0] {
					want[0], want[1] = want[1], want[0]
				}
			}
			if fmt.Sprint(histories) != fmt.Sprint(want) {
				t.Fatalf("histories %q, want %q", histories, want)
			}
		})
	}
}
