package objstore

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkPutFromSparse: each op is the streamed first revision of a
// new sparse file (the review's repro without the mount: truncate -s 1G,
// then three 4 KiB blocks of random bytes), PutFrom and its commit into
// a fresh store. DELTAFS_BENCH_MIB sets another size, and
// DELTAFS_BENCH_ENCODERS the number of encoders (-1: none, every chunk
// the appender's), DELTAFS_BENCH_PLAIN=1 hides the file's type (as the
// mount's counting reader does: no mapping, no hole finding, every chunk
// read). Besides ns/op it reports the process's CPU per op and the
// stored bytes.
func BenchmarkPutFromSparse(b *testing.B) {
	size := int64(1 << 30)
	if v, err := strconv.Atoi(os.Getenv("DELTAFS_BENCH_MIB")); err == nil && v > 0 {
		size = int64(v) << 20
	}
	enc, _ := strconv.Atoi(os.Getenv("DELTAFS_BENCH_ENCODERS"))
	src := sparseFile(b, filepath.Join(b.TempDir(), "sparse"), size, []int64{size / 7, size / 2, size - 3<<12})
	var from io.ReaderAt = src
	if os.Getenv("DELTAFS_BENCH_PLAIN") == "1" {
		from = plainReader{src}
	}
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	var stored uint64
	for range b.N {
		b.StopTimer()
		s, _ := openNew(b, Config{encoders: enc})
		f := mustNewFile(b, s, "sparse")
		c0 := processCPU(b)
		b.StartTimer()
		e, commit, err := s.PutFrom(ctx, PutRequest{File: f}, from, size, nil)
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
