package objstore

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/internal/testutil"
)

// TestDirectWriter: pieces of every length written from an unaligned
// offset land byte for byte as plain writes would put them, whether the
// file takes direct I/O, does not (page cache only), or refuses it
// halfway (a misaligned stage: EINVAL, then the page cache); and the
// bytes before the writer's start are left alone.
func TestDirectWriter(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 3*stageSize+12345)
	for i := range data {
		data[i] = byte(r.IntN(256))
	}
	var pieces []int
	for left := len(data); left > 0; {
		n := min(left, []int{1, 7, 4096, 5000, chunkSize, chunkSize/3 + 1}[r.IntN(6)])
		pieces, left = append(pieces, n), left-n
	}
	const start = 1000 + recHeaderLen // a record's chunks start anywhere
	for _, mode := range []string{"direct", "page cache", "refused"} {
		t.Run(mode, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			prefix := bytes.Repeat([]byte{0xee}, start)
			if _, err := f.Write(prefix); err != nil {
				t.Fatal(err)
			}
			w := newDirectWriter(f, start)
			switch {
			case mode == "direct" && w.d == nil:
				testutil.SkipOrFail(t, "the temporary directory's file system takes no O_DIRECT")
			case mode == "page cache":
				w.close()
			case mode == "refused":
				w.skew = 1 // misaligned stages: a direct write fails with EINVAL
			}
			at := 0
			for _, n := range pieces {
				if err := w.write(data[at : at+n]); err != nil {
					t.Fatal(err)
				}
				at += n
			}
			if err := w.finish(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:start], prefix) || !bytes.Equal(got[start:], data) {
				t.Fatalf("file of %d bytes differs from what was written (%d)", len(got), start+len(data))
			}
			if mode == "direct" && w.direct < int64(len(data)-stageSize) {
				t.Fatalf("%d of %d bytes written directly", w.direct, len(data))
			}
			if mode != "direct" && w.direct != 0 {
				t.Fatalf("%d bytes written directly", w.direct)
			}
		})
	}
}
