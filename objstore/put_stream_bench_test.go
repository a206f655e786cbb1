package objstore

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPutFromBig: each op is the streamed first revision of a new
// file (M1's recording, without the mount): PutFrom of a live file in
// the page cache and its commit, into a fresh store. The file is a 16
// MiB text cycled in 1 MiB blocks as M1's writer does, 1 GiB by default
// (DELTAFS_BENCH_MIB sets another size, DELTAFS_BENCH_ENCODERS the
// number of encoders: -1 none). Besides ns/op it reports the
// process's CPU per op (user+system: the cores the recording takes) and
// the stored bytes.
func BenchmarkPutFromBig(b *testing.B) {
	size := int64(1 << 30)
	if v, err := strconv.Atoi(os.Getenv("DELTAFS_BENCH_MIB")); err == nil && v > 0 {
		size = int64(v) << 20
	}
	enc, _ := strconv.Atoi(os.Getenv("DELTAFS_BENCH_ENCODERS"))
	src := benchSource(b, size)
	ctx := context.Background()
	b.SetBytes(size)
	b.ResetTimer()
	var cpu time.Duration
	var stored uint64
	for range b.N {
		b.StopTimer()
		s, _ := openNew(b, Config{encoders: enc})
		f := mustNewFile(b, s, "m1")
		c0 := processCPU(b)
		b.StartTimer()
		e, commit, err := s.PutFrom(ctx, PutRequest{File: f}, src, size, nil)
		if err == nil {
			err = commit()
		}
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		cpu += processCPU(b) - c0
		stored += uint64(e.Stored)
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(stored)/float64(b.N), "stored-B/op")
}

// benchSource writes size bytes of a cycled text to a file and returns
// it open, read once so that it is in the page cache as a live file
// just written is.
func benchSource(b *testing.B, size int64) *os.File {
	p := genText(rand.New(rand.NewPCG(31, 32)), 16<<20)
	path := filepath.Join(b.TempDir(), "live")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	const block = 1 << 20
	for off := int64(0); off < size; off += block {
		start := off % int64(len(p)-block)
		if _, err := f.Write(p[start : start+min(block, size-off)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if _, err := ReadAll(f, size); err != nil {
		b.Fatal(err)
	}
	return f
}

// processCPU returns the process's user+system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
