package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func gcSuite() Suite {
	return Suite{
		Name: "gc",
		Doc:  "G1: gc and per-snapshot exclusive bytes on a store of many snapshots",
		Run:  runGCSuite,
		Children: map[string]ChildFunc{
			"gcbuild": childGCBuild, "gcrun": childGCRun, "gcusage": childGCUsage,
		},
	}
}

// gcVariant is one G1 store: the same revisions, snapshots taken more or
// less often, half of them deleted or not.
type gcVariant struct {
	name string
	args []string
}

// gcRow is what G1 measured on one variant.
type gcRow struct {
	name             string
	revisions, snaps int64
	usage, plan      Summary
	def, prune       gcRun
}

// gcRun is one policy's gc on a variant.
type gcRun struct {
	Summary
	removed, before, after int64
}

func runGCSuite(env *Env) (Report, error) {
	rep := Report{Intro: []string{
		"G1 builds one history (200 files of 4 KiB, then 1,000 rounds of 10 small edits each, a file deleted from the " +
			"tree every 50 rounds: 9,756 revisions) three times, with a snapshot every 100 rounds (10), every " +
			"round (1,000), and every round with every other snapshot deleted afterwards (500 left). On a fresh copy " +
			"each time it computes every snapshot's exclusive bytes (objstore.SnapshotUsages, what `deltafs snapshot " +
			"list` shows), plans a gc (`deltafs gc --dry-run`: the bitmap union and one pass over the revisions), and " +
			"runs `deltafs gc` with the default policy and with `--prune-unsnapshotted`. " +
			"Each measurement is a fresh child process on one core (GOMAXPROCS=1); medians of -n runs."}}
	variants := []gcVariant{
		{"10 snapshots", []string{"-every", "100"}},
		{"1,000 snapshots", []string{"-every", "1"}},
		{"1,000 snapshots, half deleted", []string{"-every", "1", "-delete-half"}},
	}
	var rows []gcRow
	for _, v := range variants {
		row, err := env.runG1(v)
		if err != nil {
			return rep, fmt.Errorf("G1 %s: %w", v.name, err)
		}
		rows = append(rows, row)
	}
	rep.Tables = append(rep.Tables, gcTable(rows), gcTargets(rows))
	return rep, nil
}

// runG1 builds the variant's store once, then measures on fresh copies.
func (e *Env) runG1(v gcVariant) (gcRow, error) {
	row := gcRow{name: v.name}
	base := filepath.Join(e.Work, "G1-template", "store")
	if err := os.RemoveAll(filepath.Dir(base)); err != nil {
		return row, err
	}
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return row, err
	}
	e.Logf("G1 %s: build", v.name)
	b, err := e.Child("gc", "gcbuild", append([]string{"-dir", base}, v.args...)...)
	if err != nil {
		return row, err
	}
	row.revisions, row.snaps = b.Result.Sizes["revisions"][0], b.Result.Sizes["snapshots"][0]
	measure := func(op string, args ...string) (Summary, Sample, error) {
		var ss []Sample
		for i := range e.Opts.Runs {
			e.Logf("G1 %s: %s %v (run %d of %d)", v.name, op, args, i+1, e.Opts.Runs)
			run := filepath.Join(e.Work, "G1-run")
			if err := os.RemoveAll(run); err != nil {
				return Summary{}, Sample{}, err
			}
			if err := os.CopyFS(run, os.DirFS(filepath.Dir(base))); err != nil {
				return Summary{}, Sample{}, err
			}
			s, err := e.Child("gc", op, append([]string{"-dir", filepath.Join(run, "store")}, args...)...)
			if err != nil {
				return Summary{}, Sample{}, err
			}
			ss = append(ss, s)
		}
		return summarise(ss), ss[len(ss)-1], nil
	}
	if row.usage, _, err = measure("gcusage"); err != nil {
		return row, err
	}
	if row.plan, _, err = measure("gcrun", "-policy", "plan"); err != nil {
		return row, err
	}
	for _, p := range []struct {
		policy string
		out    *gcRun
	}{{"default", &row.def}, {"prune", &row.prune}} {
		sum, last, err := measure("gcrun", "-policy", p.policy)
		if err != nil {
			return row, err
		}
		z := last.Result.Sizes
		*p.out = gcRun{Summary: sum, removed: z["removed"][0], before: z["before"][0], after: z["after"][0]}
	}
	return row, nil
}

// summarise gives the medians of samples.
func summarise(ss []Sample) Summary {
	var walls, cpus []time.Duration
	var rss []int64
	for _, s := range ss {
		walls, cpus, rss = append(walls, s.Wall), append(cpus, s.CPU), append(rss, s.MaxRSS)
	}
	return Summary{Runs: len(ss), Wall: median(walls), CPU: median(cpus), MaxRSS: median(rss)}
}

func gcTable(rows []gcRow) Table {
	t := Table{Title: "G1: gc and exclusive bytes against the number of snapshots",
		Doc: "usage = every snapshot's exclusive bytes; plan = gc --dry-run; gc = plan + rewrite of the kept " +
			"revisions (repack's shadow and switch, reuse=auto) + deleting the removed entries; it rewrites only when " +
			"something is removed. size = segment bytes before -> after. Times are CPU (wall in brackets: the machine " +
			"was loaded); RSS is the child's own peak.",
		Header: []string{"store", "revisions", "snapshots", "usage", "usage RSS", "plan", "plan RSS",
			"gc: removed", "gc", "gc RSS", "size", "prune: removed", "gc --prune-unsnapshotted", "RSS", "size"}}
	cw := func(s Summary) string { return fmt.Sprintf("%s (%s)", msOrSecs(s.CPU), msOrSecs(s.Wall)) }
	size := func(r gcRun) string { return fmt.Sprintf("%s -> %s", mb(r.before), mb(r.after)) }
	for _, r := range rows {
		t.Add(r.name, fmt.Sprint(r.revisions), fmt.Sprint(r.snaps), cw(r.usage), mib(r.usage.MaxRSS)+" MiB",
			cw(r.plan), mib(r.plan.MaxRSS)+" MiB",
			fmt.Sprint(r.def.removed), cw(r.def.Summary), mib(r.def.MaxRSS)+" MiB", size(r.def),
			fmt.Sprint(r.prune.removed), cw(r.prune.Summary), mib(r.prune.MaxRSS)+" MiB", size(r.prune))
	}
	return t
}

func msOrSecs(d time.Duration) string {
	if d < time.Second {
		return ms(d)
	}
	return secs(d)
}

func gcTargets(rows []gcRow) Table {
	t := Table{Title: "G1 targets", Header: []string{"target", "measured", "met"}}
	if len(rows) < 3 {
		return t
	}
	add := func(what string, a, b time.Duration) {
		ratio := float64(a) / float64(b)
		met := "yes"
		if ratio > 2 {
			met = "no"
		}
		t.Add(what, fmt.Sprintf("%.2fx (CPU %s vs %s)", ratio, msOrSecs(a), msOrSecs(b)), met)
	}
	add("gc after deleting half of 1,000 snapshots within 2x of gc with 10 snapshots (default policy)", rows[2].def.CPU, rows[0].def.CPU)
	add("the same, plan only (gc --dry-run)", rows[2].plan.CPU, rows[0].plan.CPU)
	add("the same, gc --prune-unsnapshotted (rewrites 5x the kept revisions)", rows[2].prune.CPU, rows[0].prune.CPU)
	return t
}
