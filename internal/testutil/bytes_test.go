package testutil

import (
	"bytes"
	"testing"
)

func TestBytesDeterministic(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 1000} {
		a, b := Bytes(42, n), Bytes(42, n)
		if len(a) != n || !bytes.Equal(a, b) {
			t.Fatalf("n=%d: len %d, equal=%v", n, len(a), bytes.Equal(a, b))
		}
	}
	if bytes.Equal(Bytes(1, 64), Bytes(2, 64)) {
		t.Fatal("different seeds gave the same bytes")
	}
	if !bytes.HasPrefix(Bytes(5, 100), Bytes(5, 10)) {
		t.Fatal("a shorter run is not a prefix of a longer one with the same seed")
	}
}
