package main

import (
	"fmt"
	"strings"

	"github.com/deltafs/deltafs/objstore"
)

func storeIntro(env *Env, missing []string) []string {
	intro := []string{
		"deltafs ingests through objstore.Put in a fresh child process (GOMAXPROCS=1) that reads " +
			"the revisions from a generator process through a pipe, as git fast-import reads its input; " +
			"only the Put calls and the final Close are timed, and its peak RSS (VmHWM) is the store's " +
			"plus the revision being read (the generator's memory is its own). git and hg are fed the " +
			"same revisions by a child that generates them; their figures are the tools' own processes " +
			"(wall, user+sys CPU summed over every process, largest peak RSS, with the floor that " +
			"starting a program from the generator adds to ru_maxrss shown in brackets). git and hg " +
			"use both cores; deltafs one.",
		fmt.Sprintf("Medians of %d runs for deltafs and for reads, %d run(s) for the git and hg ingests and repacks. "+
			"Reads are a fresh process each: deltafs times objstore.Open+Get inside the process, git "+
			"and hg are whole processes (`git cat-file -p SHA:file`, `hg cat -r N file`, output to /dev/null). "+
			"cold = after `sync; echo 3 > /proc/sys/vm/drop_caches`; warm = right after the same read.",
			env.Opts.Runs, env.Opts.VCSRuns),
	}
	if len(missing) > 0 {
		intro = append(intro, "Skipped (not installed): "+strings.Join(missing, ", ")+".")
	}
	return intro
}

func (r s1Result) tables() []Table {
	ing := Table{Title: "S1: ingest and size",
		Doc: r.chain.Doc + fmt.Sprintf(" (%s logical). content = the file's own history "+
			"(deltafs: Stats.StoredBytes; git: packed blob bytes from verify-pack; hg: the filelog); "+
			"disk = du of the whole store or repository (deltafs: segments + badger index + lock).", mb(r.logical)),
		Header: []string{"store", "wall", "CPU", "peak RSS", "content", "disk (du)", "note"}}
	for i, row := range append([]ingestRow{r.deltafs, r.limited}, r.baselines...) {
		if i == 1 {
			ing.Add("(deltafs ingest child without the Puts)", "-", "-", mib(r.reader)+" MiB", "-", "-",
				"reading the stream with an open store: the floor of the peak RSS")
		}
		rss := mib(row.sum.MaxRSS) + " MiB"
		if row.floor > 0 {
			rss += fmt.Sprintf(" (%s)", mib(row.floor))
		}
		ing.Add(row.name, secs(row.sum.Wall), secs(row.sum.CPU), rss, mb(row.content), mb(row.disk), row.note)
	}
	rd := Table{Title: "S1: reading one revision",
		Doc: fmt.Sprintf("newest = rev %d, oldest = rev %d, middle = rev %d (fixed pseudo-random). Wall time, median.",
			r.revs[0], r.revs[1], r.revs[2]),
		Header: []string{"reader", "newest cold", "oldest cold", "middle cold", "newest warm", "oldest warm", "middle warm"}}
	for _, row := range r.reads {
		rd.Add(row.name, ms(row.cold[0]), ms(row.cold[1]), ms(row.cold[2]), ms(row.warm[0]), ms(row.warm[1]), ms(row.warm[2]))
	}
	return []Table{ing, rd}
}

// find returns the row called name.
func find(rows []ingestRow, name string) (ingestRow, bool) {
	for _, r := range rows {
		if r.name == name {
			return r, true
		}
	}
	return ingestRow{}, false
}

// smallestGit is the git row with the least content and the least disk.
func smallestGit(rows []ingestRow) (content, disk ingestRow, ok bool) {
	for _, r := range rows {
		if !strings.HasPrefix(r.name, "git ") {
			continue
		}
		if !ok || r.content < content.content {
			content = r
		}
		if !ok || r.disk < disk.disk {
			disk = r
		}
		ok = true
	}
	return content, disk, ok
}

func storeTargets(s1 *s1Result, s2 *s2Result, s3 *s3Result) Table {
	t := Table{Title: "Targets (issue 3)", Header: []string{"target", "measured", "goal", "met"}}
	if s1 != nil {
		s1Targets(&t, *s1)
	}
	if s2 != nil {
		s2Targets(&t, *s2)
	}
	if s3 != nil {
		s3Targets(&t, *s3)
	}
	return t
}

func s1Targets(t *Table, s1 s1Result) {
	if c, d, ok := smallestGit(s1.baselines); ok {
		t.Add("S1 size, file history", fmt.Sprintf("%s / %s (%s) = %.2f", mb(s1.deltafs.content), mb(c.content), c.name,
			ratio(s1.deltafs.content, c.content)), "<= 1.00", yes(s1.deltafs.content <= c.content))
		t.Add("S1 size, whole store (du)", fmt.Sprintf("%s / %s (%s) = %.2f", mb(s1.deltafs.disk), mb(d.disk), d.name,
			ratio(s1.deltafs.disk, d.disk)), "<= 1.00", yes(s1.deltafs.disk <= d.disk))
	}
	if fi, ok := find(s1.baselines, "git fast-import --depth=2000"); ok {
		x := fi.sum.Wall.Seconds() / s1.deltafs.sum.Wall.Seconds()
		t.Add("S1 ingest vs git fast-import, wall", fmt.Sprintf("%s vs %s = %.1fx faster", secs(s1.deltafs.sum.Wall), secs(fi.sum.Wall), x),
			">= 10x", yes(x >= 10))
		xc := fi.sum.CPU.Seconds() / s1.deltafs.sum.CPU.Seconds()
		t.Add("S1 ingest vs git fast-import, CPU", fmt.Sprintf("%s vs %s = %.1fx less", secs(s1.deltafs.sum.CPU), secs(fi.sum.CPU), xc),
			"(same, on CPU)", yes(xc >= 10))
	}
	budget := s1RSSTarget(s1.chain)
	goal := fmt.Sprintf("< %s MiB (4 x %s MiB + caches %s + %s)", mib(budget), mib(int64(s1.chain.BaseSize)),
		mib(objstore.DefaultCacheBytes), mib(objstore.DefaultLatestBytes))
	t.Add("S1 ingest peak RSS", fmt.Sprintf("%s MiB", mib(s1.deltafs.sum.MaxRSS)), goal, yes(s1.deltafs.sum.MaxRSS < budget))
	strict := s1StrictRSS(s1.chain)
	sgoal := fmt.Sprintf("< %s MiB (4 x %s MiB + read cache %s)", mib(strict), mib(int64(s1.chain.BaseSize)), mib(objstore.DefaultCacheBytes))
	t.Add("S1 ingest peak RSS, read cache alone", fmt.Sprintf("%s MiB", mib(s1.deltafs.sum.MaxRSS)), sgoal, yes(s1.deltafs.sum.MaxRSS < strict))
	t.Add("S1 ingest peak RSS, GOMEMLIMIT at that", fmt.Sprintf("%s MiB, CPU %s (%.2fx)", mib(s1.limited.sum.MaxRSS),
		secs(s1.limited.sum.CPU), s1.limited.sum.CPU.Seconds()/s1.deltafs.sum.CPU.Seconds()), sgoal, yes(s1.limited.sum.MaxRSS < strict))
}

func s2Targets(t *Table, s2 s2Result) {
	q := ratio(s2.best.content, s2.p1.content)
	t.Add("S2 best-of-parents vs p1-only", fmt.Sprintf("%s / %s = %.2f", mb(s2.best.content), mb(s2.p1.content), q), "<= 0.80", yes(q <= 0.8))
	if rp, ok := find(s2.baselines, "git repack -adf --window=250 --depth=250"); ok {
		t.Add("S2 size vs git repack, file history", fmt.Sprintf("%s / %s = %.2f", mb(s2.best.content), mb(rp.content),
			ratio(s2.best.content, rp.content)), "<= 1.00", yes(s2.best.content <= rp.content))
		t.Add("S2 size vs git repack, whole (du)", fmt.Sprintf("%s / %s = %.2f", mb(s2.best.disk), mb(rp.disk),
			ratio(s2.best.disk, rp.disk)), "<= 1.00", yes(s2.best.disk <= rp.disk))
	}
}

func s3Targets(t *Table, s3 s3Result) {
	on := s3.rows[0]
	pq := float64(on.p99) / float64(on.p50)
	t.Add("S3 caps on: p99 / p50 read latency, wall", fmt.Sprintf("%s / %s = %.2f", ms(on.p99), ms(on.p50), pq), "<= 3", yes(pq <= 3))
	cq := float64(on.cpu99) / float64(on.cpu50)
	t.Add("S3 caps on: p99 / p50 read latency, CPU", fmt.Sprintf("%s / %s = %.2f", ms(on.cpu99), ms(on.cpu50), cq), "<= 3", yes(cq <= 3))
	t.Add("S3 caps on: bytes read per revision", fmt.Sprintf("max %.2fx the text, %d over", on.readMax, on.overCap),
		"<= 2x (MaxReadRatio)", yes(on.overCap == 0))
}

func storeNotes(env *Env, cold bool) []string {
	notes := []string{
		"git: " + toolVersion("git", "--version") + "; hg: " + toolVersion("hg", "--version") +
			" with its defaults (HGRCPATH empty): " + hgFormat(env),
		"git's content column counts only blobs; its disk column adds commits, trees, the index and " +
			"hooks of a bare repository. hg's disk adds the changelog and manifest.",
	}
	if !cold {
		notes = append(notes, "The page cache could not be dropped (not root): cold reads are warm.")
	}
	return notes
}

// hgFormat lists the revlog format variants a new hg repository gets.
func hgFormat(env *Env) string {
	dir, err := env.freshDir("hg-format")
	if err != nil {
		return "unknown"
	}
	if _, err := runHg(env.ctx, dir, "init"); err != nil {
		return "unknown"
	}
	a, _ := readFileString(dir + "/.hg/requires")
	b, _ := readFileString(dir + "/.hg/store/requires")
	return strings.Join(strings.Fields(a+" "+b), ", ")
}
