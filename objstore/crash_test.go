package objstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

const crashFiles = 3

var crashBase = sync.OnceValue(func() [][]byte {
	var bases [][]byte
	for f := range crashFiles + 1 {
		bases = append(bases, genText(rand.New(rand.NewPCG(uint64(f), 99)), 16_000+f*1000))
	}
	return bases
})

// crashContent is the deterministic content of revision rev of file f, so
// the parent can check every byte the child wrote.
func crashContent(f index.FileID, rev index.Rev) []byte {
	if rev%11 == 10 {
		return crashContent(f, rev-1) // an identical revision: dedup
	}
	base := crashBase()[f]
	r := rand.New(rand.NewPCG(uint64(f), uint64(rev)))
	out := fmt.Appendf(nil, "file %d rev %d\n", f, rev)
	a, b := r.IntN(len(base)/2), len(base)/2+r.IntN(len(base)/2)
	out = append(out, base[:a]...)
	out = append(out, line(r)...)
	out = append(out, base[a:b]...)
	out = append(out, line(r)...)
	return append(out, base[b:]...)
}

// crashBigBase is the text of the streamed puts' files.
var crashBigBase = sync.OnceValue(func() []byte {
	return bytes.Repeat(genText(rand.New(rand.NewPCG(7, 99)), 1<<20), bigFull>>20+1)
})

// crashBig is the content of the streamed file f (not one of the
// crashFiles): a new file's first revision of bigFull bytes or more.
func crashBig(f index.FileID) []byte {
	return append(fmt.Appendf(nil, "big file %d\n", f), crashBigBase()...)
}

// helperPutLoop puts revisions of crashFiles files from concurrent writers
// until killed, printing "ok <file> <rev> <hash>" once each Put returns;
// and, beside them if stream, new big files streamed from a file
// (PutFrom).
func helperPutLoop(dir string, stream bool) error {
	s, err := Open(dir, Config{SegmentSize: 128 << 10})
	if err != nil {
		return err
	}
	for f := index.FileID(1); f <= crashFiles; f++ {
		if _, err := s.File(f); errors.Is(err, ErrNotFound) {
			if got, err := s.NewFile(fmt.Sprint(f)); err != nil || got != f {
				return fmt.Errorf("new file %d: got %d, %v", f, got, err)
			}
		}
	}
	fmt.Println("ready")
	errc := make(chan error, crashFiles+1)
	for f := index.FileID(1); f <= crashFiles; f++ {
		go func() { errc <- putForever(s, f) }()
	}
	if stream {
		go func() { errc <- streamForever(s, filepath.Join(dir, "big.src")) }()
	}
	return <-errc
}

// streamForever puts two new big files, each streamed from a file, then
// waits for the kill: enough for a kill during a stream to be likely,
// few enough to keep the store small.
func streamForever(s *Store, path string) error {
	for i := 0; ; i++ {
		if i == 2 {
			select {}
		}
		f, err := s.NewFile(fmt.Sprint("big", i))
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, crashBig(f), 0o600); err != nil {
			return err
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		e, commit, err := s.PutFrom(context.Background(), PutRequest{File: f}, src, int64(len(crashBig(f))), nil)
		if err == nil {
			err = commit()
		}
		src.Close()
		if err != nil {
			return err
		}
		if e.Flags&index.FlagChunked == 0 {
			return fmt.Errorf("big file %d not stored chunked: %v", f, e.Flags)
		}
		fmt.Printf("ok %d %d %d\n", f, e.Rev, e.Hash)
	}
}

// wantContent is what acknowledged revision id holds.
func wantContent(id index.RevID) []byte {
	if id.File > crashFiles {
		return crashBig(id.File)
	}
	return crashContent(id.File, id.Rev)
}

func putForever(s *Store, f index.FileID) error {
	for {
		m, err := s.File(f)
		if err != nil {
			return err
		}
		rev := index.Rev(m.Revs)
		req := PutRequest{File: f, Data: crashContent(f, rev)}
		if rev > 0 {
			req.P1 = index.RevID{File: f, Rev: rev - 1}
		}
		if rev%7 == 6 {
			req.P2 = index.RevID{File: f, Rev: rev - 3}
		}
		e, err := s.Put(context.Background(), req)
		if err != nil {
			return err
		}
		if e.Rev != rev {
			return fmt.Errorf("put got rev %d, want %d", e.Rev, rev)
		}
		fmt.Printf("ok %d %d %d\n", f, e.Rev, e.Hash)
	}
}

type ack struct {
	id   index.RevID
	hash uint64
}

// TestKill9 SIGKILLs a writer at random moments and checks, after every
// kill, that each revision whose Put returned reads back byte-identical and
// that the store verifies clean.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 loop skipped in -short")
	}
	dir := t.TempDir()
	s, err := Open(dir, Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := rand.New(rand.NewPCG(2026, 11))
	const rounds = 50
	var acked []ack
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	start := time.Now()
	for round := range rounds {
		// Half the rounds kill after the first acknowledged put, so that
		// the loop exercises puts however slow the machine is; a quarter
		// stream big files beside the puts and kill after the first one,
		// so that a kill during the next one is likely; the rest kill at
		// any moment after start-up, recovery included.
		after := []putKillAt{putKillAny, putKillAfterStream, putKillAfterAck, putKillAfterAck}[r.IntN(4)]
		acks := killRound(t, dir, time.Duration(r.IntN(150))*time.Millisecond, after)
		acked = append(acked, acks...)
		checkAfterCrash(t, dir, acked, len(acks), round, log)
	}
	if len(acked) < rounds/2 {
		t.Fatalf("only %d puts acknowledged over %d rounds: the loop did not exercise much", len(acked), rounds)
	}
	big := 0
	for _, a := range acked {
		if a.id.File > crashFiles {
			big++
		}
	}
	if big == 0 {
		t.Errorf("no streamed put acknowledged: the loop did not test them")
	}
	cuts := strings.Count(logs.String(), "uncommitted")
	if cuts == 0 {
		t.Errorf("no kill ever left an uncommitted tail to cut: the loop did not test recovery")
	}
	t.Logf("%d rounds, %d acknowledged puts (%d streamed), %d uncommitted tails cut, %v", rounds, len(acked), big, cuts, time.Since(start))
}

// putKillAt is when killRound starts counting its wait.
type putKillAt int

const (
	putKillAny         putKillAt = iota // once the helper is ready
	putKillAfterAck                     // from the first acknowledged put
	putKillAfterStream                  // from the first acknowledged streamed put
)

// killRound runs the put loop, kills it after wait (counted from the
// moment after says) and returns its acks.
func killRound(t *testing.T, dir string, wait time.Duration, after putKillAt) []ack {
	role := "put-loop"
	if after == putKillAfterStream {
		role = "put-loop-stream"
	}
	cmd, _, out, first := startHelper(t, role, dir)
	if first != "ready" {
		t.Fatalf("helper said %q", first)
	}
	var acks []ack
	done := make(chan struct{})
	firstAck := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		fired := false
		for sc.Scan() {
			var a ack
			var f, rev uint64
			if _, err := fmt.Sscanf(sc.Text(), "ok %d %d %d", &f, &rev, &a.hash); err != nil {
				continue // a line torn by the kill
			}
			a.id = index.RevID{File: index.FileID(f), Rev: index.Rev(rev)}
			acks = append(acks, a)
			if !fired && (after == putKillAfterAck || after == putKillAfterStream && a.id.File > crashFiles) {
				close(firstAck)
				fired = true
			}
		}
	}()
	if after != putKillAny {
		select {
		case <-firstAck:
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("no put acknowledged within 30 s (%d)", after)
		}
	}
	time.Sleep(wait)
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("helper ended before the kill: %v", err)
	}
	return acks
}

// checkAfterCrash checks every acknowledged revision, a streamed one
// only in the round that acknowledged it (the last fresh of acked).
func checkAfterCrash(t *testing.T, dir string, acked []ack, fresh, round int, log *slog.Logger) {
	t.Helper()
	s, err := Open(dir, Config{Logger: log})
	if err != nil {
		t.Fatalf("round %d: reopen: %v", round, err)
	}
	defer s.Close()
	ctx := context.Background()
	for i, a := range acked {
		if a.id.File > crashFiles && i < len(acked)-fresh {
			continue // checked in its round; verifyClean checks its hash
		}
		got, err := s.Get(ctx, a.id)
		if err != nil {
			t.Fatalf("round %d: acknowledged %v lost: %v", round, a.id, err)
		}
		if !bytes.Equal(got, wantContent(a.id)) || s.cfg.hash(got) != a.hash {
			t.Fatalf("round %d: acknowledged %v reads back wrong", round, a.id)
		}
	}
	checkCommitted(t, s, round)
}

// checkCommitted checks, after a crash, that every committed revision of
// the crash workloads' files, acknowledged or not, holds the right bytes,
// and that Verify finds nothing wrong.
func checkCommitted(t *testing.T, s *Store, round int) {
	t.Helper()
	ctx := context.Background()
	for f := index.FileID(1); f <= crashFiles; f++ {
		err := s.Revisions(ctx, f, func(e index.Entry) error {
			got, err := s.Get(ctx, e.ID())
			if err != nil || !bytes.Equal(got, crashContent(f, e.Rev)) {
				return fmt.Errorf("%v: %v (bytes wrong: %v)", e.ID(), err, err == nil)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	verifyClean(t, s)
}
