package mount

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// catOnly is a Controller whose Cat answers with text; nothing else is
// called.
type catOnly struct {
	Controller
	text Text
}

func (c catOnly) Cat(context.Context, Target, RevSpec) (FileRev, Text, error) {
	return FileRev{}, c.text, nil
}

// brokenText writes n bytes of its 10 MiB, then fails (a spill file's
// read error after the answer's header went out).
type brokenText struct{ n int }

func (b brokenText) Size() int64  { return 10 << 20 }
func (b brokenText) Close() error { return nil }
func (b brokenText) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(bytes.Repeat([]byte{'x'}, b.n))
	return int64(n), errors.Join(err, errors.New("read error"))
}

// TestCatTextCutShortIsAnError: a text the mount fails to send whole
// gives the caller an error, not a short output.
func TestCatTextCutShortIsAnError(t *testing.T) {
	dir := t.TempDir()
	srv, err := serveControl(dir, uint32(os.Getuid()), catOnly{text: brokenText{n: 4096}}, quiet())
	mustDo(t, err)
	defer srv.Close()
	_, text, err := remote{dir: dir}.Cat(context.Background(), Target{Path: "x"}, RevSpec{})
	mustDo(t, err)
	defer text.Close()
	if n, err := text.WriteTo(io.Discard); !errors.Is(err, io.ErrUnexpectedEOF) || n != 4096 || !strings.Contains(err.Error(), "the mount stopped sending the revision") {
		t.Fatalf("%d bytes, %v; want 4096 and an unexpected EOF that says the mount stopped sending", n, err)
	}
}

// failingWriter fails every write (a cat into a pipe whose reader left).
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestCatWriterFailureIsNotTheMounts: a cat whose own output fails gets
// that error, not one that blames the mount.
func TestCatWriterFailureIsNotTheMounts(t *testing.T) {
	dir := t.TempDir()
	const size = 1 << 20
	srv, err := serveControl(dir, uint32(os.Getuid()), catOnly{text: &revText{data: make([]byte, size), size: size}}, quiet())
	mustDo(t, err)
	defer srv.Close()
	_, text, err := remote{dir: dir}.Cat(context.Background(), Target{Path: "x"}, RevSpec{})
	mustDo(t, err)
	defer text.Close()
	if _, err := text.WriteTo(failingWriter{}); err == nil || err.Error() != "broken pipe" {
		t.Fatalf("%v; want the writer's own error alone", err)
	}
}

// TestControlCloseCutsAStalledCat: a cat whose caller stopped reading (a
// pipe into a pager left open) no longer holds the mount's shutdown
// (controlServer.Close) until its deadline: it is cut after
// closeWriteGrace, and the caller reads a short text, an error.
func TestControlCloseCutsAStalledCat(t *testing.T) {
	dir := t.TempDir()
	const size = 40 << 20 // far more than the socket buffers
	srv, err := serveControl(dir, uint32(os.Getuid()), catOnly{text: &revText{data: make([]byte, size), size: size}}, quiet())
	mustDo(t, err)
	_, text, err := remote{dir: dir}.Cat(context.Background(), Target{Path: "x"}, RevSpec{})
	mustDo(t, err)
	defer text.Close()
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		mustDo(t, err)
	case <-time.After(closeWriteGrace + 10*time.Second):
		t.Fatal("Close still waits for a cat nobody reads")
	}
	if n, err := text.WriteTo(io.Discard); err == nil || n >= size || !strings.Contains(err.Error(), "an unmount ends an answer not read within") {
		t.Fatalf("the stalled cat read %d of %d bytes, %v; want a short read and an error that names the unmount's cut", n, size, err)
	}
}

// slowRestore is a Controller whose Restore takes d, counted in n, and
// succeeds: a big restore through the mount.
type slowRestore struct {
	Controller
	d time.Duration
	n *atomic.Int32
}

func (c slowRestore) Restore(context.Context, Target, *uint32) (FileRev, error) {
	c.n.Add(1)
	time.Sleep(c.d)
	return FileRev{}, nil
}

// TestControlCloseAnswersARunningRequest: a request running when Close
// comes finishes and its caller gets its answer, however long it ran:
// the grace to take an answer counts from when the answer starts. With
// the grace counted from Close, a restore that succeeded was reported
// failed (a review of 8b37c58).
func TestControlCloseAnswersARunningRequest(t *testing.T) {
	dir := t.TempDir()
	var n atomic.Int32
	srv, err := serveControl(dir, uint32(os.Getuid()), slowRestore{d: closeWriteGrace + time.Second, n: &n}, quiet())
	mustDo(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := remote{dir: dir}.Restore(context.Background(), Target{Path: "x"}, nil)
		done <- err
	}()
	for n.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	mustDo(t, srv.Close())
	if err := <-done; err != nil {
		t.Fatalf("the restore ran, but its caller got %v", err)
	}
}

// TestControlCloseTakesNoFurtherRequest: a second request sent with the
// first (read ahead with it) is not run once Close has come.
func TestControlCloseTakesNoFurtherRequest(t *testing.T) {
	dir := t.TempDir()
	var n atomic.Int32
	srv, err := serveControl(dir, uint32(os.Getuid()), slowRestore{d: time.Second, n: &n}, quiet())
	mustDo(t, err)
	conn, err := net.Dial("unix", filepath.Join(dir, ControlSocket))
	mustDo(t, err)
	defer conn.Close()
	line, err := json.Marshal(Request{Op: "restore", Path: "x"})
	mustDo(t, err)
	line = append(line, '\n')
	_, err = conn.Write(append(bytes.Clone(line), line...))
	mustDo(t, err)
	go io.Copy(io.Discard, conn)
	for n.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	mustDo(t, srv.Close())
	if got := n.Load(); got != 1 {
		t.Fatalf("%d restores ran; the second was read ahead with the first and run after Close", got)
	}
}
