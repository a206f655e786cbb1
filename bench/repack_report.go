package main

import "fmt"

func repackIntro(env *Env) []string {
	return []string{
		"Each workload's revisions are written once into a deltafs store (a child process making the Put " +
			"calls its writer makes) and once into a git repository (`git fast-import --depth=2000`, one " +
			"commit per revision, or per round for R3). Every repack then runs on a fresh `cp -a` copy as a " +
			"whole process: `deltafs repack --json` built from this checkout, or `git repack -q`; wall, " +
			"user+system CPU and peak RSS are that process's (the RSS floor of starting a program this way is " +
			"in the notes). Both use every core (deltafs --jobs defaults to the CPU count, git's pack.threads too).",
		fmt.Sprintf("Medians of %d run(s) for deltafs, %d for git (-n, -vcs-n). size = deltafs segment files, "+
			"git pack files (apparent bytes); du = the whole store or repository after the repack. "+
			"\"already repacked\" runs on the result of --reuse=never; git's reuse row on the result of its --window=10 repack.",
			env.Opts.Runs, env.Opts.VCSRuns),
	}
}

func repackNotes() []string {
	return []string{
		"git: " + toolVersion("git", "--version") + ". deltafs repack: default window " +
			"(objstore.DefaultRepackWindow), chain caps and --jobs.",
		"The deltafs repack takes the store lock and writes a shadow store that it switches to atomically; " +
			"its time includes that switch and the fsyncs.",
	}
}

func (r repackResult) table() Table {
	doc := r.w.doc
	if r.revs > 0 {
		doc += fmt.Sprintf(" (%d revisions, %s logical)", r.revs, mb(r.logical))
	}
	t := Table{Title: r.w.id + ": repack", Doc: doc + ".",
		Header: []string{"repack", "size before", "size after", "after/before", "vs git w250", "du after",
			"wall", "CPU", "peak RSS (MiB)", "chain max", "note"}}
	w250 := r.row(rowGit250)
	for _, row := range r.rows {
		vs := "-"
		if w250 != nil {
			vs = ratioCell(row.after, w250.after, true)
		}
		chain := "-"
		if row.chainMax > 0 {
			chain = fmt.Sprint(row.chainMax)
		}
		rss := "-"
		if row.sum.MaxRSS > 0 {
			rss = mib(row.sum.MaxRSS)
		}
		t.Add(row.name, mb(row.before), mb(row.after), ratioCell(row.after, row.before, true), vs, mb(row.disk),
			secs(row.sum.Wall), secs(row.sum.CPU), rss, chain, row.note)
	}
	return t
}

// row finds the row called name.
func (r repackResult) row(name string) *repackRow {
	for i := range r.rows {
		if r.rows[i].name == name {
			return &r.rows[i]
		}
	}
	return nil
}

// repackTargets checks the targets of issue 6 for every workload.
func repackTargets(rs []repackResult) Table {
	t := Table{Title: "Targets (issue 6, repack)", Header: []string{"target", "workload", "measured", "goal", "met"}}
	for _, r := range rs {
		never, autoRe, w10, w250 := r.row(rowNever), r.row(rowAutoRe), r.row(rowGit10), r.row(rowGit250)
		if never == nil {
			continue
		}
		if w250 != nil {
			t.Add("--reuse=never size vs git --window=250 --depth=250 pack", r.w.id,
				fmt.Sprintf("%s / %s = %s", mb(never.after), mb(w250.after), ratioCell(never.after, w250.after, true)),
				"<= 1.00", yes(never.after <= w250.after))
		}
		if w10 != nil {
			t.Add("--reuse=never wall vs git --window=10 repack", r.w.id,
				fmt.Sprintf("%s / %s", secs(never.sum.Wall), secs(w10.sum.Wall)), "< 1", yes(never.sum.Wall < w10.sum.Wall))
			t.Add("(same, CPU)", r.w.id,
				fmt.Sprintf("%s / %s", secs(never.sum.CPU), secs(w10.sum.CPU)), "(info)", yes(never.sum.CPU < w10.sum.CPU))
		}
		if autoRe != nil {
			speed := float64(never.sum.Wall) / float64(max(autoRe.sum.Wall, 1))
			t.Add("--reuse=auto on a repacked store vs --reuse=never, wall", r.w.id,
				fmt.Sprintf("%s vs %s = %.1fx", secs(autoRe.sum.Wall), secs(never.sum.Wall), speed), ">= 10x", yes(speed >= 10))
			diff := 100 * (float64(autoRe.after) - float64(never.after)) / float64(max(never.after, 1))
			t.Add("--reuse=auto on a repacked store, size vs --reuse=never", r.w.id,
				fmt.Sprintf("%s vs %s (%+.2f%%)", mb(autoRe.after), mb(never.after), diff), "within 1%",
				yes(diff <= 1 && diff >= -1))
		}
	}
	return t
}
