package objstore

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/deltafs/deltafs/index"
)

func openNew(t testing.TB, cfg Config) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	cfg.Create = true
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

var words = []string{"the", "store", "delta", "chain", "revision", "parent", "snapshot",
	"segment", "index", "badger", "merge", "file", "read", "write", "cap", "zstd",
	"hash", "record", "commit", "lock", "fsync", "base", "text", "copy", "insert"}

// genText returns about n bytes of text-like lines from r.
func genText(r *rand.Rand, n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(line(r))
	}
	return b.Bytes()[:n]
}

func line(r *rand.Rand) string {
	var b bytes.Buffer
	for i := range 4 + r.IntN(10) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	if r.IntN(4) == 0 {
		b.WriteString(" ")
		b.WriteString(string(rune('a' + r.IntN(26))))
		b.WriteString(string(rune('0' + r.IntN(10))))
	}
	b.WriteByte('\n')
	return b.String()
}

// edit applies n small edits (replace, insert or delete a line) to text.
func edit(r *rand.Rand, text []byte, n int) []byte {
	out := bytes.Clone(text)
	for range n {
		pos := 0
		if len(out) > 0 {
			pos = r.IntN(len(out))
		}
		if i := bytes.IndexByte(out[pos:], '\n'); i >= 0 {
			pos += i + 1
		} else {
			pos = len(out)
		}
		end := pos
		if i := bytes.IndexByte(out[pos:], '\n'); i >= 0 {
			end = pos + i + 1
		}
		var repl string
		switch r.IntN(3) {
		case 0: // replace
			repl = line(r)
		case 1: // insert
			repl, end = line(r), pos
		default: // delete
		}
		out = append(out[:pos:pos], append([]byte(repl), out[end:]...)...)
	}
	return out
}

func mustPut(t testing.TB, s *Store, req PutRequest) index.Entry {
	t.Helper()
	e, err := s.Put(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mustGet(t testing.TB, s *Store, id index.RevID) []byte {
	t.Helper()
	b, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustNewFile(t testing.TB, s *Store, name string) index.FileID {
	t.Helper()
	f, err := s.NewFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func verifyClean(t testing.TB, s *Store) {
	t.Helper()
	n, err := s.Verify(context.Background(), func(p Problem) { t.Errorf("verify: %v", p) })
	if err != nil || n != 0 {
		t.Fatalf("verify: %d problems, %v", n, err)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
func errorsIsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
