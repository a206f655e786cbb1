package objstore

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
)

// TestIntermediateSnapshotBetterLevel: an intermediate snapshot (a delta
// against a snapshot, taken when the chain cap rules every parent out)
// is encoded with the zstd-dictionary codec at snapshotZstdLevel, and
// stores less than the parents' level would; it reads back.
func TestIntermediateSnapshotBetterLevel(t *testing.T) {
	s, _ := openNew(t, Config{MaxChainLen: 8})
	r := rand.New(rand.NewPCG(41, 42))
	f := mustNewFile(t, s, "f")
	v := newVocab(r, 3000)
	text := v.text(r, 200<<10)
	var prev index.RevID
	var snap index.Entry
	var put []byte // the snapshot's text
	for i := 0; i < 20 && snap.Kind != index.KindIntermediate; i++ {
		snap, put = mustPut(t, s, PutRequest{File: f, Data: text, P1: prev}), text
		prev = snap.ID()
		text = v.overwrite(r, text, 30)
	}
	if snap.Kind != index.KindIntermediate {
		t.Fatal("no intermediate snapshot in 20 revisions under a chain cap of 8")
	}
	base, target := mustGet(t, s, snap.Base), put
	copyDelta, _ := s.compress(delta.Encode(base, target))
	def, err := delta.EncodeZstd(base, target, deltaZstdLevel)
	if err != nil {
		t.Fatal(err)
	}
	better, _ := delta.EncodeZstd(base, target, snapshotZstdLevel)
	t.Logf("copy %d, zstd-dict %d, at the better level %d", len(copyDelta), len(def), len(better))
	atDefault := recOverhead + min(len(copyDelta), len(def))
	if int(snap.Stored) >= atDefault {
		t.Fatalf("intermediate snapshot of %d bytes stored in %d, not below the %d of the parents' level", len(target), snap.Stored, atDefault)
	}
	if !bytes.Equal(mustGet(t, s, snap.ID()), put) {
		t.Fatal("intermediate snapshot reads back wrong")
	}
	t.Logf("intermediate snapshot: %d bytes (parents' level: %d)", snap.Stored, atDefault)
	verifyClean(t, s)
}

// vocab is a large vocabulary of made-up words: its text compresses
// little on its own, and a few hundred new bytes of it compress best
// against the text around them, where the zstd-dictionary codec wins (as
// on S2's workload text; genText's 25 words favour the copy codec).
type vocab [][]byte

func newVocab(r *rand.Rand, n int) vocab {
	v := make(vocab, n)
	for i := range v {
		w := make([]byte, 3+r.IntN(8))
		for j := range w {
			w[j] = byte('a' + r.IntN(26))
		}
		v[i] = w
	}
	return v
}

// text returns n bytes of the vocabulary's words, Zipf-distributed.
func (v vocab) text(r *rand.Rand, n int) []byte {
	z := rand.NewZipf(r, 1.1, 1, uint64(len(v)-1))
	var b []byte
	for len(b) < n {
		b = append(append(b, v[z.Uint64()]...), " \n"[r.IntN(2)])
	}
	return b[:n]
}

// overwrite returns a copy of text with n runs of 10-300 bytes, anywhere,
// replaced by new text (S2's edits: not line by line).
func (v vocab) overwrite(r *rand.Rand, text []byte, n int) []byte {
	out := bytes.Clone(text)
	for range n {
		k := 10 + r.IntN(291)
		copy(out[r.IntN(len(out)-k):], v.text(r, k))
	}
	return out
}
