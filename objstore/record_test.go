package objstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/deltafs/deltafs/index"
)

func TestRecordRoundTrip(t *testing.T) {
	h := recHeader{Flags: recFlagZstd | recFlagDelta, ID: index.RevID{File: 3, Rev: 9}, TextLen: 12345}
	payload := []byte("some payload bytes")
	b := appendRecord([]byte("prefix"), h, payload)[6:]
	got, p, err := decodeRecord(b)
	h.PayloadLen = uint32(len(payload))
	if err != nil || got != h || !bytes.Equal(p, payload) {
		t.Fatalf("decode: %+v %q %v", got, p, err)
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, _, err := decodeRecord(c); !errors.Is(err, errRecord) {
			t.Fatalf("flip at %d not detected: %v", i, err)
		}
	}
	for n := range len(b) {
		if _, _, err := decodeRecord(b[:n]); !errors.Is(err, errRecord) {
			t.Fatalf("truncation to %d not detected: %v", n, err)
		}
	}
}

func FuzzRecordDecode(f *testing.F) {
	f.Add(appendRecord(nil, recHeader{ID: index.RevID{File: 1}, TextLen: 3}, []byte("abc")))
	f.Add(appendRecord(nil, recHeader{Flags: recFlagDelta, ID: index.RevID{File: 2, Rev: 1}}, nil))
	f.Add([]byte(recMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, p, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, errRecord) {
				t.Fatalf("error not errRecord: %v", err)
			}
			return
		}
		again := appendRecord(nil, h, p)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encode differs")
		}
	})
}
