package fs_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/deltafs/deltafs/internal/testutil"
)

const benchFileSize = 64 << 20

// BenchmarkRandomRead4K reads 4 KiB at random offsets of a 64 MiB file,
// natively and through the mount (passthrough), with the same offsets.
func BenchmarkRandomRead4K(b *testing.B) {
	m := mountLive(b)
	data := testutil.Bytes(9, benchFileSize)
	for name, dir := range map[string]string{"native": m.live, "deltafs": m.mnt} {
		b.Run(name, func(b *testing.B) {
			p := filepath.Join(dir, "r-"+name)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				b.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // past the I/O mode grace of the writer's release
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 4096)
			r := rand.New(rand.NewPCG(1, 2))
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				off := r.Int64N(benchFileSize/4096) * 4096
				if _, err := f.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWrite4K overwrites 4 KiB at random offsets through a tracked
// (cached-mode) handle, the path that records dirty ranges.
func BenchmarkWrite4K(b *testing.B) {
	m := mountLive(b)
	data := testutil.Bytes(9, benchFileSize)
	for name, dir := range map[string]string{"native": m.live, "deltafs": m.mnt} {
		b.Run(name, func(b *testing.B) {
			p := filepath.Join(dir, "w-"+name)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				b.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := testutil.Bytes(3, 4096)
			r := rand.New(rand.NewPCG(1, 2))
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				off := r.Int64N(benchFileSize/4096) * 4096
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
