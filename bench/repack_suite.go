package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/deltafs/deltafs/bench/workload"
)

// The repack suite (issue 6): `deltafs repack` beside `git repack` on the
// same revisions. Each workload builds one deltafs store (in a child, with
// the Put calls its writer would make) and one git repository (fast-import
// of the same revisions); every repack then runs on a fresh copy of one of
// them, as a whole process measured by Env.Exec.

func repackSuite() Suite {
	return Suite{
		Name: "repack",
		Doc:  "R1-R4: deltafs repack beside git repack on S1, S2, an M3-style tree and a mount-recorded store",
		Run:  runRepackSuite,
		Children: map[string]ChildFunc{
			"ingest": childIngest, "gitimport": childGitImport,
			"mountingest": childMountIngest, "treeingest": childTreeIngest, "treegit": childTreeGit,
		},
	}
}

// repackWorkload is one store to repack: how to build its deltafs store
// and its git repository from the same revisions.
type repackWorkload struct {
	id, doc string
	store   string   // child that builds the deltafs store
	git     string   // child that builds the git repository
	flags   []string // the children's workload flags
}

// mountChain is R4's history: what a program rewriting a 2 MiB text in
// place from its first changed byte leaves the mount to record.
func mountChain() workload.Chain {
	return workload.Chain{Name: "R4", Doc: "2 MiB text, 600 revisions of 1-5 edits of 10-500 B each",
		Seed: 34, BaseSize: 2 * workload.MiB, Steps: 599,
		Edits: workload.EditSpec{Count: 5, MinLen: 10, MaxLen: 500}, CountMin: 1}
}

func repackWorkloads() []repackWorkload {
	s1, s2 := workload.StoreS1(), workload.StoreS2()
	mnt := mountChain()
	return []repackWorkload{
		{id: "R1", doc: "S1's store: " + s1.Doc + ", put with objstore.Put (p1 = previous revision)",
			store: "ingest", git: "gitimport", flags: chainFlags(s1)},
		{id: "R2", doc: fmt.Sprintf("S2's store: %d revisions of a %d KiB text on two lines of development, 30%% merges",
			s2.Revisions, s2.Size>>10), store: "ingest", git: "gitimport", flags: mergeFlags(s2)},
		{id: "R3", doc: fmt.Sprintf("M3-style tree: M3's %d files in %d directories, then %d rounds each editing %d%% of the files (1-3 edits of 10-300 B), one git commit per round",
			m3Tree.Dirs*m3Tree.Files, m3Tree.Dirs, repackTreeRounds, repackTreeEditPct),
			store: "treeingest", git: "treegit", flags: nil},
		{id: "R4", doc: mnt.Doc + ", recorded as the mount records an in-place rewrite from the first changed byte: " +
			"a delta-only Put of delta.EncodeWrites's copy/insert delta against the previous revision, the fulltext when the store asks for it (mount defaults, objstore.Config{})",
			store: "mountingest", git: "gitimport", flags: chainFlags(mnt)},
	}
}

func runRepackSuite(env *Env) (Report, error) {
	missing := env.ensureTools([]string{"git"}, []string{"git"})
	rep := Report{Intro: repackIntro(env)}
	bin, err := env.buildDeltafs()
	if err != nil {
		return rep, err
	}
	var results []repackResult
	for _, w := range repackWorkloads() {
		if !env.Opts.selected(w.id) {
			continue
		}
		r, err := env.runRepack(w, bin, !contains(missing, "git"))
		if err != nil {
			return rep, fmt.Errorf("%s: %w", w.id, err)
		}
		results = append(results, r)
		rep.Tables = append(rep.Tables, r.table())
	}
	rep.Tables = append(rep.Tables, repackTargets(results))
	rep.Notes = repackNotes()
	return rep, nil
}

// repackRow is one repack measured: its process figures and the sizes
// before and after.
type repackRow struct {
	name          string
	sum           Summary
	before, after int64 // deltafs: segment bytes; git: pack files
	disk          int64 // du of the store/repository after
	chainMax      int64 // deltafs only
	note          string
}

type repackResult struct {
	w       repackWorkload
	revs    int64
	logical int64
	floor   int64
	rows    []repackRow
}

// Row names, also used by the targets.
const (
	rowGit10    = "git repack -adf --window=10 --depth=50"
	rowGit250   = "git repack -adf --window=250 --depth=250"
	rowGitAD    = "git repack -ad (reuse), after fast-import"
	rowGitADRe  = "git repack -ad (reuse), after --window=10 repack"
	rowNever    = "deltafs repack --reuse=never"
	rowAuto     = "deltafs repack --reuse=auto"
	rowAutoRe   = "deltafs repack --reuse=auto, already repacked"
	rowNeverRe  = "deltafs repack --reuse=never, already repacked"
	rowIngested = "as written"
)

func (e *Env) runRepack(w repackWorkload, bin string, git bool) (repackResult, error) {
	r := repackResult{w: w, floor: e.RSSFloor()}
	store := filepath.Join(e.Work, w.id+"-deltafs")
	e.Logf("%s: build the deltafs store (%s)", w.id, w.store)
	if err := os.RemoveAll(store); err != nil {
		return r, err
	}
	ing, err := e.Child("repack", w.store, append([]string{"-dir", store}, w.flags...)...)
	if err != nil {
		return r, err
	}
	r.logical = ing.Result.Bytes
	for k, v := range ing.Result.Sizes {
		if strings.HasPrefix(k, "kind ") {
			r.revs += v[0]
		}
	}
	seg, err := segmentBytes(store)
	if err != nil {
		return r, err
	}
	disk, _, _ := dirBytes(store)
	r.rows = append(r.rows, repackRow{name: rowIngested + " (deltafs)", before: seg, after: seg, disk: disk,
		chainMax: ing.Result.Sizes["chain_max"][0], note: fmt.Sprintf("ingest CPU %s", secs(ing.CPU))})
	if git {
		if err := e.repackGit(w, &r); err != nil {
			return r, err
		}
	}
	for _, v := range []struct{ name, src, dst, reuse string }{
		{rowNever, store, store + "-never", "never"},
		{rowAuto, store, store + "-auto", "auto"},
		{rowAutoRe, store + "-never", store + "-never-auto", "auto"},
		{rowNeverRe, store + "-never", store + "-never-never", "never"},
	} {
		row, err := e.repackDeltafs(bin, v.name, v.src, v.dst, v.reuse)
		if err != nil {
			return r, err
		}
		r.rows = append(r.rows, row)
	}
	return r, nil
}

// repackDeltafs copies src to dst and runs deltafs repack there, -n times.
func (e *Env) repackDeltafs(bin, name, src, dst, reuse string) (repackRow, error) {
	row := repackRow{name: name}
	e.Logf("%s of %s, x%d", name, filepath.Base(src), e.Opts.Runs)
	sum, err := Repeat(e.Opts.Runs, func() (Sample, error) {
		if err := copyTree(src, dst); err != nil {
			return Sample{}, err
		}
		return e.Exec(bin, "repack", "--reuse="+reuse, "--json", dst)
	})
	if err != nil {
		return row, err
	}
	row.sum = sum
	if row.before, err = segmentBytes(src); err != nil {
		return row, err
	}
	if row.after, err = segmentBytes(dst); err != nil {
		return row, err
	}
	row.disk, _, _ = dirBytes(dst)
	sizes, err := storeSizes(dst, 1)
	if err != nil {
		return row, err
	}
	row.chainMax = sizes["chain_max"][0]
	return row, nil
}

// repackGit imports the revisions into git once, then runs each git
// repack on a fresh copy.
func (e *Env) repackGit(w repackWorkload, r *repackResult) error {
	repo, err := e.freshDir(w.id + "-git")
	if err != nil {
		return err
	}
	e.Logf("%s: git fast-import (%s)", w.id, w.git)
	imp, err := e.Child("repack", w.git, append([]string{"-dir", repo}, w.flags...)...)
	if err != nil {
		return err
	}
	pack, err := packBytes(repo)
	if err != nil {
		return err
	}
	disk, _, _ := dirBytes(repo)
	r.rows = append(r.rows, repackRow{name: rowIngested + " (git fast-import --depth=2000)", before: pack, after: pack,
		disk: disk, note: fmt.Sprintf("fast-import CPU %s", secs(imp.CPU))})
	for _, v := range []struct {
		name, src, dst string
		args           []string
	}{
		{rowGit10, repo, repo + "-w10", []string{"-adf", "--window=10", "--depth=50"}},
		{rowGit250, repo, repo + "-w250", []string{"-adf", "--window=250", "--depth=250"}},
		{rowGitAD, repo, repo + "-ad", []string{"-ad"}},
		{rowGitADRe, repo + "-w10", repo + "-w10-ad", []string{"-ad"}},
	} {
		e.Logf("%s of %s, x%d", v.name, filepath.Base(v.src), e.Opts.VCSRuns)
		sum, err := Repeat(e.Opts.VCSRuns, func() (Sample, error) {
			if err := copyTree(v.src, v.dst); err != nil {
				return Sample{}, err
			}
			return e.Exec("git", append([]string{"-C", v.dst, "repack", "-q"}, v.args...)...)
		})
		if err != nil {
			return err
		}
		row := repackRow{name: v.name, sum: sum}
		if row.before, err = packBytes(v.src); err != nil {
			return err
		}
		if row.after, err = packBytes(v.dst); err != nil {
			return err
		}
		row.disk, _, _ = dirBytes(v.dst)
		r.rows = append(r.rows, row)
	}
	return nil
}

// copyTree replaces dst with a copy of src.
func copyTree(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %w: %s", err, out)
	}
	return nil
}

// segmentBytes is the apparent size of a store's segment files.
func segmentBytes(store string) (int64, error) {
	_, n, err := dirBytes(filepath.Join(store, "segments"))
	return n, err
}

// packBytes is the apparent size of a repository's pack files.
func packBytes(repo string) (int64, error) {
	packs, err := filepath.Glob(filepath.Join(repo, "objects", "pack", "*.pack"))
	var n int64
	for _, p := range packs {
		fi, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, err
}
