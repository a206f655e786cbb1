package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// The deltafs ingest reads its revisions the way git fast-import reads its
// input: as a stream from another process. A generator process (the bench
// binary run as `bench __history FLAGS`) writes the history to its stdout;
// the ingest child starts it and reads each revision from the pipe into a
// fresh buffer, which it hands to Put. The generator's memory (the text
// generator, its copies of the text) is its own process's, so the ingest
// child's peak RSS is the store's plus the one revision being read.
//
// Stream format, per revision in order: a 24-byte header of three
// little-endian int64s (p1, p2: revision numbers, -1 for none; the text's
// length), then the text. The stream ends after the last revision.

// historyCmd is the hidden subcommand that writes a history stream.
const historyCmd = "__history"

const streamHeader = 24

// maxStreamText bounds one revision of the stream, so a corrupt header
// cannot make the reader allocate without bound.
const maxStreamText = 1 << 32

// writeHistory writes the history the store child flags describe to w.
func writeHistory(args []string, w io.Writer) error {
	a, err := parseStoreArgs(args)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var hdr [streamHeader]byte
	err = a.walkHistory(func(_, p1, p2 int, _ byte, data []byte) error {
		binary.LittleEndian.PutUint64(hdr[0:], uint64(int64(p1)))
		binary.LittleEndian.PutUint64(hdr[8:], uint64(int64(p2)))
		binary.LittleEndian.PutUint64(hdr[16:], uint64(len(data)))
		if _, err := bw.Write(hdr[:]); err != nil {
			return err
		}
		_, err := bw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// streamRev is one revision read from a history stream.
type streamRev struct {
	p1, p2 int
	data   []byte
}

// readStreamRev reads the next revision into a new buffer; io.EOF at a
// clean end of the stream.
func readStreamRev(r io.Reader) (streamRev, error) {
	var hdr [streamHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return streamRev{}, fmt.Errorf("history stream: torn header: %w", err)
		}
		return streamRev{}, err
	}
	n := binary.LittleEndian.Uint64(hdr[16:])
	if n > maxStreamText {
		return streamRev{}, fmt.Errorf("history stream: text of %d bytes", n)
	}
	rev := streamRev{p1: int(int64(binary.LittleEndian.Uint64(hdr[0:]))),
		p2: int(int64(binary.LittleEndian.Uint64(hdr[8:]))), data: make([]byte, n)}
	if _, err := io.ReadFull(r, rev.data); err != nil {
		return streamRev{}, fmt.Errorf("history stream: text of %d bytes: %w", n, err)
	}
	return rev, nil
}

// historyReader is a running generator process and the read end of its
// output.
type historyReader struct {
	cmd *exec.Cmd
	out io.ReadCloser
}

// startHistory starts `bench __history args` and returns its output.
func startHistory(ctx context.Context, args []string) (*historyReader, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{historyCmd}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("history generator: %w", err)
	}
	return &historyReader{cmd: cmd, out: out}, nil
}

// each calls fn with every revision of the stream, numbered from 0, then
// waits for the generator. On an error from fn it stops the generator.
func (h *historyReader) each(fn func(n int, r streamRev) error) error {
	br := bufio.NewReaderSize(h.out, 256<<10)
	var err error
	for n := 0; ; n++ {
		var r streamRev
		if r, err = readStreamRev(br); err != nil {
			break
		}
		if err = fn(n, r); err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if err != nil {
		h.cmd.Process.Kill()
	}
	h.out.Close()
	if werr := h.cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("history generator: %w", werr)
	}
	return err
}
