package objstore

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/deltafs/deltafs/index"
)

// lockedBuf is a log sink shared by the store's goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPutSkipsCorruptBase: a put whose parent's record is bad skips that
// base (one warning naming it), deltas against a readable candidate or
// stores a fulltext, and reads back; verify still reports the bad
// revision alone, so nothing new depends on its record.
func TestPutSkipsCorruptBase(t *testing.T) {
	s, dir := openNew(t, Config{})
	r := rand.New(rand.NewPCG(21, 22))
	f := mustNewFile(t, s, "f")
	text := genText(r, 20000)
	var prev index.RevID
	var bad index.Entry
	for range 3 {
		bad = mustPut(t, s, PutRequest{File: f, Data: text, P1: prev})
		prev = bad.ID()
		text = edit(r, text, 3)
	}
	if bad.Kind != index.KindP1 {
		t.Fatalf("revision %v stored as %v, want a delta on its parent", bad.ID(), bad.Kind)
	}
	s.Close()
	flipByte(t, filepath.Join(dir, "segments", segName(bad.Seg)), int64(bad.Off+uint64(bad.Stored)/2), 0x5a)

	var logs lockedBuf
	s, err := Open(dir, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(context.Background(), bad.ID()); !errorsIs(err, ErrCorrupt) {
		t.Fatalf("flipped %v reads: %v, want ErrCorrupt", bad.ID(), err)
	}
	hint := index.RevID{File: f, Rev: 1}
	withHint := mustPut(t, s, PutRequest{File: f, Data: text, P1: bad.ID(), Hints: []index.RevID{hint}})
	if withHint.Kind != index.KindHint || withHint.Base != hint {
		t.Errorf("put with a readable hint stored as %v on %v, want a delta on the hint %v", withHint.Kind, withHint.Base, hint)
	}
	if !bytes.Equal(mustGet(t, s, withHint.ID()), text) {
		t.Fatalf("%v does not read back", withHint.ID())
	}
	text2 := edit(r, text, 3)
	alone := mustPut(t, s, PutRequest{File: f, Data: text2, P1: bad.ID()})
	if alone.Base == bad.ID() {
		t.Fatalf("%v stored on the corrupt %v", alone.ID(), bad.ID())
	}
	if !bytes.Equal(mustGet(t, s, alone.ID()), text2) {
		t.Fatalf("%v does not read back", alone.ID())
	}
	want := "base=" + bad.ID().String()
	if n := strings.Count(logs.String(), want); n != 2 || !strings.Contains(logs.String(), fmt.Sprintf("file=%d", f)) {
		t.Errorf("want one warning per put naming file %v and %q, log:\n%s", f, want, logs.String())
	}
	var reported []index.RevID
	if _, err := s.Verify(context.Background(), func(p Problem) { reported = append(reported, p.Rev) }); err != nil {
		t.Fatal(err)
	}
	if len(reported) != 1 || reported[0] != bad.ID() {
		t.Fatalf("verify reported %v, want only %v", reported, bad.ID())
	}
}
