package objstore

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// envInt reads a benchmark size from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkRepack repacks an S1-like store (one text file, a few line edits
// per revision, written by puts with the defaults) with reuse=auto and
// reuse=never, and reuse=auto again on the store reuse=never produced (the
// "already repacked" case). Sizes: DELTAFS_REPACK_REVS revisions (default
// 100) of DELTAFS_REPACK_SIZE bytes (default 1 MiB); S1 proper is 600 of
// 8 MiB.
func BenchmarkRepack(b *testing.B) {
	revs, size := envInt("DELTAFS_REPACK_REVS", 100), envInt("DELTAFS_REPACK_SIZE", 1<<20)
	src := b.TempDir()
	s, err := Open(src, Config{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(31, 32))
	f := mustNewFile(b, s, "s1.txt")
	text := genText(r, size)
	var prev PutRequest
	for range revs {
		e := mustPut(b, s, PutRequest{File: f, Data: text, P1: prev.P1})
		prev.P1 = e.ID()
		text = edit(r, text, 3)
	}
	s.Close()
	repacked := copyStore(b, src)
	mustRepack(b, repacked, RepackOptions{Reuse: ReuseNever})
	cases := []struct {
		name  string
		store string
		reuse Reuse
	}{{"auto", src, ReuseAuto}, {"never", src, ReuseNever}, {"auto-repacked", repacked, ReuseAuto}}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var rep RepackReport
			for range b.N {
				b.StopTimer()
				dir := copyStore(b, c.store)
				b.StartTimer()
				rep = mustRepack(b, dir, RepackOptions{Reuse: c.reuse})
			}
			b.SetBytes(int64(revs) * int64(size))
			b.ReportMetric(float64(rep.SizeBefore), "before-B")
			b.ReportMetric(float64(rep.SizeAfter), "after-B")
			b.ReportMetric(float64(rep.Reused), "reused")
			b.ReportMetric(float64(rep.Redeltaed), "redeltaed")
			b.ReportMetric(float64(rep.ChainMaxAfter), "chain-max")
			b.ReportMetric(float64(rep.PeakRSS)/(1<<20), "peak-RSS-MiB")
		})
	}
}

// copyStore copies a closed store into a new temporary directory.
func copyStore(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "store")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		return copyPlainFile(p, filepath.Join(dst, rel))
	})
	if err != nil {
		tb.Fatal(err)
	}
	return dst
}

func copyPlainFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
