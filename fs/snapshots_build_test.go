package fs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"testing"
	"time"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"golang.org/x/sys/unix"
)

// makeTree creates top directories of sub directories of files: top*sub
// leaf directories, files empty unless content is set.
func makeTree(t testing.TB, live string, top, sub, files int) []string {
	t.Helper()
	var leaves []string
	for i := range top {
		for j := range sub {
			dir := fmt.Sprintf("t%03d/s%03d", i, j)
			must(t, os.MkdirAll(live+"/"+dir, 0o755))
			for k := range files {
				f, err := os.Create(fmt.Sprintf("%s/%s/f%04d", live, dir, k))
				must(t, err)
				f.Close()
			}
			leaves = append(leaves, dir)
		}
	}
	return leaves
}

// TestSnapshotCostFollowsChanges: ten changed files in a tree of 221
// directories re-serialise exactly their directories and ancestors.
func TestSnapshotCostFollowsChanges(t *testing.T) {
	e := newSnapEnv(t)
	leaves := makeTree(t, e.live, 20, 10, 25)
	if s := e.mustCreate("full"); s.Serialised != 221 || s.Reused != 0 {
		t.Fatalf("first snapshot: %+v, want 221 serialised", s)
	}
	if s := e.mustCreate("nothing"); s.Serialised != 0 || s.Reused != 1 {
		t.Fatalf("unchanged tree: %+v, want the root reused", s)
	}
	for i := range 10 {
		rel := fmt.Sprintf("%s/f%04d", leaves[i*20+i%10], i)
		writeFile(t, e.live+"/"+rel, fmt.Sprintf("change %d", i))
		e.touchPath(rel)
	}
	s := e.mustCreate("ten")
	if s.Serialised != 21 { // ten leaves, ten top directories, the root
		t.Fatalf("ten changes: %+v, want 21 directories serialised", s)
	}
	// Statted: the ten files and the twenty directories above them; every
	// other entry of the directories serialised again is kept unstatted.
	if s.Entries != 30 {
		t.Fatalf("ten changes statted %d entries, want 30", s.Entries)
	}
	if all := 10*25 + 10*10 + 20; s.Kept != all-10 { // all but the ten changed files
		t.Fatalf("ten changes kept %d of %d entries", s.Kept, all)
	}
	if s.Recent != 21 { // the first build's trees, kept through the second
		t.Fatalf("ten changes read %d previous trees from memory, want 21", s.Recent)
	}
	if s.Listed != 10 { // the ancestors' names come from their previous trees
		t.Fatalf("ten changes listed %d directories, want the 10 changed", s.Listed)
	}
	checkAgainstFullBuild(t, e, "ten")
}

// TestSnapshotKeepsOnlyUnchangedEntries: an entry of a directory
// serialised again is taken from the previous tree, without a stat, only
// if its node was not touched and its name holds the same inode; touched
// files (content, an xattr) and a name replaced by another file are
// described afresh.
func TestSnapshotKeepsOnlyUnchangedEntries(t *testing.T) {
	e := newSnapEnv(t)
	leaves := makeTree(t, e.live, 1, 1, 20)
	dir := e.live + "/" + leaves[0]
	must(t, os.Symlink("f0001", dir+"/link"))
	must(t, unix.Lsetxattr(dir+"/f0002", "user.tag", []byte("one"), 0))
	e.mustCreate("base")
	time.Sleep(30 * time.Millisecond) // past the coarse clock's tick, so ctimes move
	writeFile(t, dir+"/f0000", "changed")
	e.touchPath(leaves[0] + "/f0000")
	must(t, unix.Lsetxattr(dir+"/f0002", "user.tag", []byte("two"), 0))
	e.touchPath(leaves[0] + "/f0002")
	must(t, os.Rename(dir+"/f0003", dir+"/f0004")) // replaces f0004
	e.touchPath(leaves[0] + "/f0004")
	s := e.mustCreate("after")
	// 20 entries in the leaf (19 files, f0003 gone, and the link), one
	// each above it. Statted: f0000, f0002, f0004 and the two directories
	// above them (to be serialised again); kept: the 17 others of the
	// leaf, and t000 (statted, its stat unchanged).
	if s.Entries != 5 || s.Kept != 18 {
		t.Fatalf("stats %+v, want 5 entries statted, 18 kept", s)
	}
	checkAgainstFullBuild(t, e, "after")
	snap, err := e.st.Snapshot("after")
	must(t, err)
	tr, err := e.st.Tree(snap.Root.Tree)
	for _, name := range []string{"t000", "s000"} {
		must(t, err)
		d, _ := tr.Lookup(name)
		tr, err = e.st.Tree(d.Tree)
	}
	must(t, err)
	f2, _ := tr.Lookup("f0002")
	if len(f2.Xattrs) != 1 || string(f2.Xattrs[0].Value) != "two" {
		t.Fatalf("f0002 xattrs %+v, want user.tag=two", f2.Xattrs)
	}
}

// checkAgainstFullBuild builds the live tree again from nothing and
// checks that snapshot name holds the same tree (atimes aside: building
// reads directories, which moves their atimes) and the same references.
func checkAgainstFullBuild(t *testing.T, e *snapEnv, name string) {
	t.Helper()
	snap, err := e.st.Snapshot(name)
	must(t, err)
	fresh := fs.NewTreeBuilder(e.live)
	var built *fs.Built
	must(t, fresh.Build(context.Background(), e.revs, nil, func(b *fs.Built) error { built = b; return nil }))
	load := func(h index.TreeHash) (*index.Tree, error) {
		if b, ok := built.Trees[h]; ok {
			var tr index.Tree
			return &tr, tr.UnmarshalBinary(b)
		}
		return e.st.Tree(h)
	}
	got, want := flatten(t, load, snap.Root), flatten(t, load, built.Root)
	diffCaptures(t, "incremental vs full", got, want)
	refs, err := e.st.SnapshotRefs(snap.ID)
	must(t, err)
	all, err := index.DiffRefs(load, index.TreeHash{}, built.Root.Tree)
	must(t, err)
	if !refs.Equals(all.Added) {
		t.Errorf("references %v, full walk %v", refs.ToArray(), all.Added.ToArray())
	}
}

func flatten(t *testing.T, load index.TreeLoader, root index.TreeEntry) map[string]string {
	out := map[string]string{}
	var walk func(string, index.TreeEntry)
	walk = func(p string, e index.TreeEntry) {
		e.Atime, e.Name = 0, ""
		h := e.Tree
		e.Tree = index.TreeHash{}
		out[p] = fmt.Sprintf("%+v", e)
		if !e.IsDir() {
			return
		}
		tr, err := load(h)
		must(t, err)
		for _, c := range tr.Entries {
			walk(path.Join(p, c.Name), c)
		}
	}
	walk("/", root)
	return out
}

// TestSnapshotIncrementalRandom applies random operations to the live
// directory, marking what the live tree's hooks mark, and checks every
// incremental snapshot against a full build.
func TestSnapshotIncrementalRandom(t *testing.T) {
	e := newSnapEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	dirs := []string{""}
	var files []string
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	for step := range 40 {
		for range 5 {
			randomOp(t, e, rng, &dirs, &files, pick)
		}
		name := fmt.Sprintf("s%02d", step)
		e.mustCreate(name)
		checkAgainstFullBuild(t, e, name)
	}
}

func randomOp(t *testing.T, e *snapEnv, rng *rand.Rand, dirs, files *[]string, pick func([]string) string) {
	live := e.live + "/"
	switch op := rng.IntN(6); {
	case op == 0 || len(*files) == 0:
		d := pick(*dirs)
		f := path.Join(d, fmt.Sprintf("f%d", rng.IntN(1000)))
		if os.WriteFile(live+f, []byte(fmt.Sprint(rng.Int())), 0o644) == nil {
			e.touchPath(f)
			*files = append(*files, f)
		}
	case op == 1:
		d := path.Join(pick(*dirs), fmt.Sprintf("d%d", rng.IntN(1000)))
		if os.Mkdir(live+d, 0o755) == nil {
			e.touchPath(d) // the parent, and the new directory itself
			e.b.Touch(fs.Touch{Dir: inoOf(t, live+d)})
			*dirs = append(*dirs, d)
		}
	case op == 2:
		f := pick(*files)
		e.touchPath(f) // before: a link count change shows in every directory
		if os.WriteFile(live+f, []byte(fmt.Sprint(rng.Int())), 0o644) == nil {
			e.touchPath(f)
		}
	case op == 3:
		f, d := pick(*files), pick(*dirs)
		to := path.Join(d, fmt.Sprintf("l%d", rng.IntN(1000)))
		if os.Link(live+f, live+to) == nil {
			e.touchPath(to)
			e.touchPath(f)
			*files = append(*files, to)
		}
	case op == 4:
		f := pick(*files)
		e.touchPath(f)
		os.Remove(live + f)
	case op == 5 && len(*dirs) > 1:
		from, to := pick((*dirs)[1:]), pick(*dirs)
		dst := path.Join(to, fmt.Sprintf("m%d", rng.IntN(1000)))
		e.touchPath(from)
		if os.Rename(live+from, live+dst) == nil {
			e.touchPath(dst)
			*dirs = append(*dirs, dst) // stale names only make later ops fail
		}
	}
}
