package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/deltafs/deltafs/bench/workload"
)

type s2Result struct {
	spec      workload.MergeSpec
	merges    int
	logical   int64
	best, p1  ingestRow
	baselines []ingestRow
}

func (e *Env) runS2(m workload.MergeSpec, missing []string) (s2Result, error) {
	r := s2Result{spec: m}
	_ = m.Walk(func(_ int, rev workload.MergeRev) error {
		if rev.P2 >= 0 {
			r.merges++
		}
		return nil
	})
	flags := mergeFlags(m)
	for _, v := range []struct {
		row  *ingestRow
		name string
		args []string
	}{{&r.best, "deltafs best of parents", nil}, {&r.p1, "deltafs p1 only (Config.P1Only)", []string{"-p1only"}}} {
		dir := filepath.Join(e.Work, "S2-deltafs")
		e.Logf("S2: %s, x%d", v.name, e.Opts.Runs)
		sum, err := Repeat(e.Opts.Runs, func() (Sample, error) {
			if err := os.RemoveAll(dir); err != nil {
				return Sample{}, err
			}
			return e.Child("store", "ingest", append(append([]string{"-dir", dir}, flags...), v.args...)...)
		})
		if err != nil {
			return r, err
		}
		*v.row = ingestRow{name: v.name, sum: sum, content: sum.Sizes["stored"][0]}
		if v.row.disk, _, err = dirBytes(dir); err != nil {
			return r, err
		}
		v.row.note = fmt.Sprintf("chain max %d; bases: %s", sum.Sizes["chain_max"][0], kindCounts(sum.Sizes))
		r.logical = sum.Bytes
	}
	if !contains(missing, "git") {
		var tmp s1Result
		repo, err := e.gitImport("S2", flags, &tmp)
		if err != nil {
			return r, err
		}
		row, err := e.gitRepack(repo, repo+"-repack", false)
		if err != nil {
			return r, err
		}
		r.baselines = append(r.baselines, tmp.baselines[0], row)
	}
	if !contains(missing, "hg") {
		row, _, err := e.hgIngest("S2", flags)
		if err != nil {
			return r, err
		}
		r.baselines = append(r.baselines, row)
	}
	return r, nil
}

func (r s2Result) table() Table {
	t := Table{Title: "S2: merge-heavy history, store size",
		Doc: fmt.Sprintf("%d revisions of a %d KiB text on two long-lived lines of development (%.0f%% of the "+
			"ordinary commits on line b), each commit 1-%d edits of %d-%d B anywhere in the file; %d true merges "+
			"(%.0f%%: both lines have commits the other lacks, no fast-forwards), three-way per %d B block, a "+
			"conflict resolved to p2, the line that diverged less merging the other, so the merge is closer to p2 "+
			"(%s logical). content = the file's own history (deltafs: Stats.StoredBytes; "+
			"git: packed blobs; hg: the filelog); disk = du of the whole store/repository.",
			r.spec.Revisions, r.spec.Size>>10, 100*r.spec.BShare, r.spec.Edits.Count, r.spec.Edits.MinLen, r.spec.Edits.MaxLen,
			r.merges, 100*float64(r.merges)/float64(r.spec.Revisions), r.spec.BlockSize, mb(r.logical)),
		Header: []string{"store", "content", "vs p1-only", "disk (du)", "ingest wall", "ingest CPU", "note"}}
	for _, row := range append([]ingestRow{r.best, r.p1}, r.baselines...) {
		t.Add(row.name, mb(row.content), ratioCell(row.content, r.p1.content, true), mb(row.disk),
			secs(row.sum.Wall), secs(row.sum.CPU), row.note)
	}
	return t
}

// kindCounts renders the revision counts by base kind of an ingest.
func kindCounts(sizes map[string][]int64) string {
	var parts []string
	for _, k := range []string{"full", "p1", "p2", "p1+p2", "snapshot", "intermediate", "dedup"} {
		if v := sizes["kind "+k]; len(v) > 0 && v[0] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, v[0]))
		}
	}
	return strings.Join(parts, ", ")
}

type s3Result struct {
	chain workload.Chain
	rows  [2]s3Row // caps on, caps off
}

type s3Row struct {
	name          string
	ingest        Summary
	stored        int64
	chainMax      int64
	p50, p99, max time.Duration
	// CPU time of each read: what the read costs, without the waits for
	// a core on a shared machine that wall time includes.
	cpu50, cpu99, cpuMax time.Duration
	readMax              float64 // max bytes read / text size
	readMean             float64
	overCap              int // revisions reading more than the cap allows
}

func (e *Env) runS3(c workload.Chain) (s3Result, error) {
	r := s3Result{chain: c}
	for i, v := range []struct {
		name string
		args []string
	}{{"caps on (defaults: chain 128, reads 2x text)", nil}, {"caps off (Config.NoCaps)", []string{"-nocaps"}}} {
		dir := filepath.Join(e.Work, "S3-deltafs")
		if err := os.RemoveAll(dir); err != nil {
			return r, err
		}
		e.Logf("S3: %s: ingest %s", v.name, c.Doc)
		ing, err := e.Child("store", "ingest", append(append([]string{"-dir", dir}, chainFlags(c)...), v.args...)...)
		if err != nil {
			return r, err
		}
		e.Logf("S3: %s: read every revision", v.name)
		rd, err := e.Child("store", "readall", "-dir", dir, "-cache", "1")
		if err != nil {
			return r, err
		}
		r.rows[i] = s3Summary(v.name, ing, rd)
	}
	return r, nil
}

// readCapBytes is the most a read may read under the default caps: 2x the
// text, with objstore's floor for tiny texts.
func readCapBytes(size int64) int64 { return max(2*size, 4096) }

func s3Summary(name string, ing, rd Sample) s3Row {
	row := s3Row{name: name, ingest: Summary{Runs: 1, Wall: ing.Wall, CPU: ing.CPU, MaxRSS: ing.MaxRSS},
		stored: ing.Result.Sizes["stored"][0], chainMax: ing.Result.Sizes["chain_max"][0]}
	row.p50, row.p99, row.max = percentiles(rd.Result.Sizes["lat_ns"])
	row.cpu50, row.cpu99, row.cpuMax = percentiles(rd.Result.Sizes["cpu_ns"])
	read, size := rd.Result.Sizes["read"], rd.Result.Sizes["size"]
	var sum float64
	for i := range read {
		q := float64(read[i]) / float64(size[i])
		row.readMax, sum = max(row.readMax, q), sum+q
		if read[i] > readCapBytes(size[i]) {
			row.overCap++
		}
	}
	row.readMean = sum / float64(len(read))
	return row
}

// percentiles returns p50, p99 and the maximum of xs (nanoseconds).
func percentiles(xs []int64) (p50, p99, top time.Duration) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pct := func(p float64) time.Duration { return time.Duration(s[int(p*float64(len(s)-1))]) }
	return pct(0.5), pct(0.99), pct(1)
}

func (r s3Result) table() Table {
	t := Table{Title: "S3: 2,000 revisions, read latency with and without chain caps",
		Doc: r.chain.Doc + ". Every revision read once in a random order from a fresh process with " +
			"the fulltext cache off (CacheBytes 1), so each read rebuilds its whole chain (page cache warm). " +
			"Wall is the latency as seen; CPU is the process's CPU time during the read (one core). " +
			"bytes read = Stats.BytesRead per Get / text size.",
		Header: []string{"config", "stored", "chain max", "wall p50", "wall p99", "max", "p99/p50",
			"CPU p50", "CPU p99", "max", "p99/p50", "bytes read mean", "max", "over 2x", "ingest CPU"}}
	for _, row := range r.rows {
		t.Add(row.name, mb(row.stored), fmt.Sprint(row.chainMax), ms(row.p50), ms(row.p99), ms(row.max),
			fmt.Sprintf("%.2f", float64(row.p99)/float64(row.p50)),
			ms(row.cpu50), ms(row.cpu99), ms(row.cpuMax), fmt.Sprintf("%.2f", float64(row.cpu99)/float64(row.cpu50)),
			fmt.Sprintf("%.2fx", row.readMean), fmt.Sprintf("%.2fx", row.readMax),
			fmt.Sprint(row.overCap), secs(row.ingest.CPU))
	}
	return t
}

func secs(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }
