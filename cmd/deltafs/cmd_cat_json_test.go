package main

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/deltafs/deltafs/mount"
)

// bytesText is a mount.Text of b.
type bytesText []byte

func (b bytesText) Size() int64  { return int64(len(b)) }
func (b bytesText) Close() error { return nil }
func (b bytesText) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

// TestCatJSONStreamed: cat --json streams the revision into its base64
// and prints byte for byte what encoding the whole of it printed, for
// texts whose base64 ends with each padding, and a path that JSON must
// escape; a failing text is an error.
func TestCatJSONStreamed(t *testing.T) {
	r := mount.FileRev{FileInfo: mount.FileInfo{Path: mount.ByteString("dir/\"quoted\" <&> \xff.txt"), File: 7}}
	r.Revision.Rev, r.Revision.Size = 3, 5
	for _, n := range []int{0, 1, 2, 3, 4, 100, 3 << 20} {
		text := make([]byte, n)
		for i := range text {
			text[i] = byte(i*7 + i>>8)
		}
		var want, got bytes.Buffer
		if err := printJSON(&want, catJSON{FileRev: r, Data: text}); err != nil {
			t.Fatal(err)
		}
		if err := printCatJSON(&got, r, bytesText(text)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("%d bytes: printed %q, want %q", n, trim(got.Bytes()), trim(want.Bytes()))
		}
	}
	if err := printCatJSON(io.Discard, r, failingText{}); err == nil {
		t.Fatal("a text that fails to be read printed no error")
	}
}

func trim(b []byte) []byte { return b[:min(len(b), 400)] }

// failingText fails its WriteTo.
type failingText struct{}

func (failingText) Size() int64                      { return 10 }
func (failingText) Close() error                     { return nil }
func (failingText) WriteTo(io.Writer) (int64, error) { return 0, errors.New("read error") }
