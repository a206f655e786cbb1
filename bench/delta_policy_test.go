package main

import (
	"testing"

	"github.com/deltafs/deltafs/bench/workload"
	"github.com/deltafs/deltafs/delta"
)

// TestStorePolicy checks the delta suite's mirror of objstore's payload
// policy on the cases that differ: small copy deltas at the best level,
// zstd-dict deltas as they are, tiny payloads raw.
func TestStorePolicy(t *testing.T) {
	p, err := newStorePolicy()
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	tx := workload.NewText(4)
	base := tx.Fill(256 << 10)
	target := workload.ApplyEdits(base, tx.Edits(len(base), workload.EditSpec{Count: 40, MinLen: 100, MaxLen: 500}))
	cp := delta.Encode(base, target)
	if got, want := p.storedLen(cp), smaller(p.best, cp); got != want || got >= len(cp) {
		t.Fatalf("copy delta of %d bytes: stored %d, want %d (best level, compressed)", len(cp), got, want)
	}
	z, err := delta.EncodeZstd(base, target, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.storedLen(z); got != len(z) {
		t.Fatalf("zstd-dict delta of %d bytes stored as %d, want as it is", len(z), got)
	}
	big := tx.Fill(2 * smallDelta)
	if got, want := p.storedLen(big), smaller(p.def, big); got != want {
		t.Fatalf("payload over smallDelta: %d, want the default level's %d", got, want)
	}
	if got := p.storedLen(cp[:10]); got != 10 {
		t.Fatalf("10-byte payload stored as %d", got)
	}
}
