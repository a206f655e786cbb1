package objstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// TestWriteText copies a chunked fulltext, and a dedup of one, into a
// file byte-exact; declines a delta revision (writing nothing); and
// fails with ErrCorrupt on a flipped byte anywhere in the record.
func TestWriteText(t *testing.T) {
	ctx := context.Background()
	s, dir := openNew(t, Config{})
	f, _ := s.NewFile("big")
	data := bigMixed(21, bigFull+3*chunkSize+5)
	full, err := s.Put(ctx, PutRequest{File: f, Data: bytes.Clone(data)})
	if err != nil || full.Flags&index.FlagChunked == 0 {
		t.Fatalf("put: flags %#x, %v", full.Flags, err)
	}
	g, _ := s.NewFile("copy")
	dup, err := s.Put(ctx, PutRequest{File: g, Data: bytes.Clone(data)})
	if err != nil || dup.Kind != index.KindDedup {
		t.Fatalf("copy: kind %v, %v", dup.Kind, err)
	}
	edited := bytes.Clone(data)
	copy(edited[bigFull/2:], "edited")
	delta, err := s.Put(ctx, PutRequest{File: f, Data: edited, P1: full.ID()})
	if err != nil || delta.Kind == index.KindFull {
		t.Fatalf("edit: kind %v, %v", delta.Kind, err)
	}
	out := filepath.Join(t.TempDir(), "out")
	write := func(s *Store, id index.RevID) (bool, []byte, error) {
		w, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ok, err := s.WriteText(ctx, id, w)
		b, _ := os.ReadFile(out)
		return ok, b, err
	}
	for _, id := range []index.RevID{full.ID(), dup.ID()} {
		if ok, b, err := write(s, id); !ok || err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%v: ok %v, %d bytes, %v", id, ok, len(b), err)
		}
	}
	if ok, b, err := write(s, delta.ID()); ok || err != nil || len(b) != 0 {
		t.Fatalf("delta %v: ok %v, %d bytes written, %v; want declined", delta.ID(), ok, len(b), err)
	}
	s.Close()
	seg := filepath.Join(dir, "segments", segName(full.Seg))
	for _, at := range []uint64{20, recHeaderLen + 12, uint64(full.Stored) / 2, uint64(full.Stored) - 3} {
		flipByte(t, seg, int64(full.Off+at), 0x20)
		s, err := Open(dir, Config{CacheBytes: 1, LatestBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := write(s, full.ID()); !errors.Is(err, ErrCorrupt) {
			t.Errorf("byte %d of the record flipped: %v, want ErrCorrupt", at, err)
		}
		s.Close()
		flipByte(t, seg, int64(full.Off+at), 0x20)
	}
}
