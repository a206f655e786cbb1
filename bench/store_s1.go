package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
	"github.com/deltafs/deltafs/objstore"
)

// ingestRow is one way of storing a history: how long it took and how
// big the result is.
type ingestRow struct {
	name    string
	sum     Summary
	floor   int64 // RSS floor of the way it was started
	disk    int64 // du of the whole store or repository
	content int64 // bytes of the file's own history (deltafs stored, git blobs, hg filelog)
	note    string
}

// readRow is the time to read three revisions, cold and warm.
type readRow struct {
	name       string
	cold, warm [3]time.Duration
}

type s1Result struct {
	chain     workload.Chain
	logical   int64
	deltafs   ingestRow
	chainMax  int64
	snapshots int64
	baselines []ingestRow
	reads     []readRow
	revs      [3]int    // newest, oldest, middle
	cold      bool      // page cache was dropped for the cold reads
	reader    int64     // peak RSS of the ingest child without the Puts
	limited   ingestRow // the ingest with GOMEMLIMIT at the RSS target
}

func (e *Env) runS1(c workload.Chain, missing []string) (s1Result, error) {
	r := s1Result{chain: c, revs: [3]int{c.Steps, 0, middleRev(c)}}
	dir := filepath.Join(e.Work, "S1-deltafs")
	e.Logf("S1: deltafs ingest of %s, x%d", c.Doc, e.Opts.Runs)
	sum, err := Repeat(e.Opts.Runs, func() (Sample, error) {
		if err := os.RemoveAll(dir); err != nil {
			return Sample{}, err
		}
		return e.Child("store", "ingest", append([]string{"-dir", dir}, chainFlags(c)...)...)
	})
	if err != nil {
		return r, err
	}
	r.logical = sum.Bytes
	r.deltafs = ingestRow{name: "deltafs objstore.Put", sum: sum, content: sum.Sizes["stored"][0]}
	r.chainMax, r.snapshots = sum.Sizes["chain_max"][0], sum.Sizes["snapshots"][0]
	if r.deltafs.disk, _, err = dirBytes(dir); err != nil {
		return r, err
	}
	r.deltafs.note = fmt.Sprintf("segments %s, chain max %d, %d snapshots", mb(sum.Sizes["segment"][0]), r.chainMax, r.snapshots)
	gen, err := Repeat(e.Opts.Runs, func() (Sample, error) {
		if err := os.RemoveAll(dir + "-noput"); err != nil {
			return Sample{}, err
		}
		return e.Child("store", "ingest", append([]string{"-dir", dir + "-noput", "-noput"}, chainFlags(c)...)...)
	})
	if err != nil {
		return r, err
	}
	r.reader = gen.MaxRSS
	lim := s1StrictRSS(c)
	e.Logf("S1: deltafs ingest with GOMEMLIMIT=%d MiB, x%d", lim>>20, e.Opts.Runs)
	sum, err = Repeat(e.Opts.Runs, func() (Sample, error) {
		if err := os.RemoveAll(dir + "-limit"); err != nil {
			return Sample{}, err
		}
		return e.Child("store", "ingest", append([]string{"-dir", dir + "-limit", "-memlimit", fmt.Sprint(lim)}, chainFlags(c)...)...)
	})
	if err != nil {
		return r, err
	}
	r.limited = ingestRow{name: fmt.Sprintf("deltafs objstore.Put, GOMEMLIMIT=%dMiB", lim>>20), sum: sum,
		content: sum.Sizes["stored"][0], note: "the Go runtime told the RSS target (soft limit)"}
	if r.limited.disk, _, err = dirBytes(dir + "-limit"); err != nil {
		return r, err
	}
	rr, cold, err := e.readDeltafs(dir, r.revs)
	if err != nil {
		return r, err
	}
	r.reads, r.cold = append(r.reads, rr), cold
	if !contains(missing, "git") {
		if err := e.s1Git(c, &r); err != nil {
			return r, err
		}
	}
	if !contains(missing, "hg") {
		if err := e.s1Hg(c, &r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// s1RSSTarget is the ingest memory target: 4x the file size plus
// the store's cache budget. The store has two fulltext caches, each with
// its own configured budget: the read cache (Config.CacheBytes) and the
// newest text of recently written files (Config.LatestBytes); the cache
// budget is their sum.
func s1RSSTarget(c workload.Chain) int64 {
	return int64(4*c.BaseSize) + objstore.DefaultCacheBytes + objstore.DefaultLatestBytes
}

// s1StrictRSS is a stricter reading of the target that counts the read
// cache alone; the GOMEMLIMIT run is told this figure, to show what the
// store needs when the runtime is asked to keep its heap small.
func s1StrictRSS(c workload.Chain) int64 {
	return int64(4*c.BaseSize) + objstore.DefaultCacheBytes
}

// middleRev is a fixed "random" revision in the middle half of c.
func middleRev(c workload.Chain) int {
	return c.Steps/4 + int(workload.NewRand(c.Seed).IntN(c.Steps/2+1))
}

// readDeltafs times Open+Get of each revision in a fresh process, after
// dropping the page cache (cold) and again without (warm).
func (e *Env) readDeltafs(dir string, revs [3]int) (readRow, bool, error) {
	row := readRow{name: "deltafs Open+Get"}
	cold, err := e.readEach(&row, revs, func(rev int) (Sample, error) {
		return e.Child("store", "read", "-dir", dir, "-rev", strconv.Itoa(rev))
	})
	return row, cold, err
}

// readEach fills row with the median cold and warm times of read.
func (e *Env) readEach(row *readRow, revs [3]int, read func(rev int) (Sample, error)) (bool, error) {
	cold := true
	for i, rev := range revs {
		for _, warm := range []bool{false, true} {
			sum, err := Repeat(e.Opts.Runs, func() (Sample, error) {
				if !warm {
					cold = dropCaches() && cold
				} else if _, err := read(rev); err != nil { // warm the page cache
					return Sample{}, err
				}
				return read(rev)
			})
			if err != nil {
				return cold, fmt.Errorf("%s rev %d: %w", row.name, rev, err)
			}
			if warm {
				row.warm[i] = sum.Wall
			} else {
				row.cold[i] = sum.Wall
			}
		}
	}
	return cold, nil
}

// s1Git: fast-import, then gc --aggressive of one copy and repack -adf
// --window=250 --depth=250 of another; reads from both.
func (e *Env) s1Git(c workload.Chain, r *s1Result) error {
	repo, err := e.gitImport("S1", chainFlags(c), r)
	if err != nil {
		return err
	}
	for _, v := range []struct{ name, dir string }{
		{"git gc --aggressive", repo + "-gc"},
		{"git repack -adf --window=250 --depth=250", repo + "-repack"},
	} {
		row, err := e.gitRepack(repo, v.dir, v.name == "git gc --aggressive")
		if err != nil {
			return err
		}
		r.baselines = append(r.baselines, row)
		rr, err := e.readGit(v.name, v.dir, r.revs)
		if err != nil {
			return err
		}
		r.reads = append(r.reads, rr)
	}
	return nil
}

// gitImport runs the gitimport child into a fresh bare repository named
// for workload w, appending its row to r, and returns the repository.
func (e *Env) gitImport(w string, flags []string, r *s1Result) (string, error) {
	repo, err := e.freshDir(w + "-git")
	if err != nil {
		return "", err
	}
	e.Logf("%s: git fast-import --depth=2000", w)
	sum, err := Repeat(e.Opts.VCSRuns, func() (Sample, error) {
		if err := os.RemoveAll(repo); err != nil {
			return Sample{}, err
		}
		return e.Child("store", "gitimport", append([]string{"-dir", repo}, flags...)...)
	})
	if err != nil {
		return "", err
	}
	row := ingestRow{name: "git fast-import --depth=2000", sum: sum, floor: sum.Sizes["rss_floor"][0]}
	if err := gitSizes(repo, &row); err != nil {
		return "", err
	}
	r.baselines = append(r.baselines, row)
	return repo, nil
}

// gitRepack copies the imported repository to dir and repacks it there.
func (e *Env) gitRepack(src, dir string, gc bool) (ingestRow, error) {
	args := []string{"-C", dir, "repack", "-adf", "-q", "--window=250", "--depth=250"}
	row := ingestRow{name: "git repack -adf --window=250 --depth=250", note: "after fast-import"}
	if gc {
		args = []string{"-C", dir, "gc", "--aggressive", "-q"}
		row = ingestRow{name: "git gc --aggressive", note: "after fast-import; window 250, depth 50"}
	}
	e.Logf("%s of %s, x%d", row.name, filepath.Base(src), e.Opts.VCSRuns)
	sum, err := Repeat(e.Opts.VCSRuns, func() (Sample, error) {
		if err := os.RemoveAll(dir); err != nil {
			return Sample{}, err
		}
		if out, err := exec.Command("cp", "-a", src, dir).CombinedOutput(); err != nil {
			return Sample{}, fmt.Errorf("cp: %w: %s", err, out)
		}
		return e.Exec("git", args...)
	})
	if err != nil {
		return row, err
	}
	row.sum, row.floor = sum, e.RSSFloor()
	return row, gitSizes(dir, &row)
}

// gitSizes fills in the repository's du and the packed size of its blobs.
func gitSizes(repo string, row *ingestRow) error {
	var err error
	if row.disk, _, err = dirBytes(repo); err != nil {
		return err
	}
	idx, _ := filepath.Glob(filepath.Join(repo, "objects", "pack", "*.idx"))
	for _, p := range idx {
		out, err := exec.Command("git", "-C", repo, "verify-pack", "-v", p).Output()
		if err != nil {
			return fmt.Errorf("verify-pack: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 5 && f[1] == "blob" {
				n, _ := strconv.ParseInt(f[3], 10, 64)
				row.content += n
			}
		}
	}
	return nil
}

// readGit times git cat-file -p MARK:file for each revision.
func (e *Env) readGit(name, repo string, revs [3]int) (readRow, error) {
	marks, err := readMarks(filepath.Join(repo, "bench-marks"))
	if err != nil {
		return readRow{}, err
	}
	row := readRow{name: strings.Replace(name, "git ", "git cat-file -p, after ", 1)}
	_, err = e.readEach(&row, revs, func(rev int) (Sample, error) {
		return e.Exec("git", "-C", repo, "cat-file", "-p", marks[rev+1]+":"+storeFile)
	})
	return row, err
}

// readMarks parses a fast-import marks file: ":N SHA" per line.
func readMarks(path string) (map[int]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var n int
		var sha string
		if _, err := fmt.Sscanf(l, ":%d %s", &n, &sha); err == nil {
			m[n] = sha
		}
	}
	return m, nil
}

// s1Hg commits every revision with hg and reads with hg cat.
func (e *Env) s1Hg(c workload.Chain, r *s1Result) error {
	row, repo, err := e.hgIngest("S1", chainFlags(c))
	if err != nil {
		return err
	}
	r.baselines = append(r.baselines, row)
	rr := readRow{name: "hg cat -r"}
	_, err = e.readEach(&rr, r.revs, func(rev int) (Sample, error) {
		return e.Exec("hg", "-R", repo, "--config", "ui.username=bench", "cat", "-r", strconv.Itoa(rev), filepath.Join(repo, storeFile))
	})
	r.reads = append(r.reads, rr)
	return err
}

// hgIngest runs the hgingest child into a fresh repository.
func (e *Env) hgIngest(w string, flags []string) (ingestRow, string, error) {
	repo, err := e.freshDir(w + "-hg")
	if err != nil {
		return ingestRow{}, "", err
	}
	e.Logf("%s: hg commit per revision, x%d", w, e.Opts.VCSRuns)
	sum, err := Repeat(e.Opts.VCSRuns, func() (Sample, error) {
		if err := os.RemoveAll(repo); err != nil {
			return Sample{}, err
		}
		return e.Child("store", "hgingest", append([]string{"-dir", repo}, flags...)...)
	})
	if err != nil {
		return ingestRow{}, "", err
	}
	row := ingestRow{name: "hg commit per revision", sum: sum, floor: sum.Sizes["rss_floor"][0]}
	store := filepath.Join(repo, ".hg", "store")
	if row.disk, _, err = dirBytes(store); err != nil {
		return row, "", err
	}
	for _, ext := range []string{".i", ".d"} {
		if fi, err := os.Stat(filepath.Join(store, "data", storeFile+ext)); err == nil {
			row.content += fi.Size()
		}
	}
	row.note = "du of .hg/store; content = filelog data/" + storeFile + ".i+.d"
	return row, repo, nil
}

func syncAll() error {
	syscall.Sync()
	return nil
}

// mb formats bytes as MB (10^6).
func mb(n int64) string { return fmt.Sprintf("%.3f MB", float64(n)/1e6) }
