package objstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/deltafs/deltafs/index"
)

// Segment record layout (all integers big-endian):
//
//	off  size  field
//	0    4     magic "dfsR"
//	4    1     record version (1)
//	5    1     flags: bit0 payload zstd-compressed, bit1 payload is a delta,
//	                 bit2 payload is a chunked fulltext (chunked.go; format 2),
//	                 bit3 with bit2: the chunk table was written last
//	                 (format 3; see below)
//	6    2     reserved, zero
//	8    8     file id       } the revision the record belongs to, so that
//	16   4     revision      } index/segment agreement can be checked
//	20   4     payload length
//	24   8     fulltext length
//	32   n     payload
//	32+n 8     xxhash64 of bytes [0, 32+n)
//
// A record is never rewritten; a torn tail fails its checksum.
//
// A chunked record with recFlagLateTable (a streamed one,
// chunked_stream.go) sums the same bytes in another order: its chunks
// (the payload past its table) first, then the header, then the table,
// so that its writer sums the chunks as it appends them and the header
// and table, known only at the end, last; it never reads the record
// back. Every byte is still covered: a flipped byte anywhere fails the
// checksum.
const (
	recMagic      = "dfsR"
	recVersion    = 1
	recHeaderLen  = 32
	recTrailerLen = 8
	recOverhead   = recHeaderLen + recTrailerLen

	recFlagZstd    = 1 << 0
	recFlagDelta   = 1 << 1
	recFlagChunked = 1 << 2
	// recFlagLateTable: only with recFlagChunked (format 3).
	recFlagLateTable = 1 << 3
	recFlagsAll      = recFlagZstd | recFlagDelta | recFlagChunked | recFlagLateTable

	// maxPayload bounds what a header may claim, so a corrupt length cannot
	// make a reader allocate without limit.
	maxPayload = 1<<31 - 1
)

// errRecord is wrapped by every record decoding error.
var errRecord = errors.New("bad record")

type recHeader struct {
	Flags      byte
	ID         index.RevID
	PayloadLen uint32
	TextLen    uint64
}

func (h *recHeader) zstd() bool  { return h.Flags&recFlagZstd != 0 }
func (h *recHeader) delta() bool { return h.Flags&recFlagDelta != 0 }

// chunked: a fulltext in independently encoded chunks, never zstd or a
// delta as a whole (parseHeader refuses those combinations).
func (h *recHeader) chunked() bool { return h.Flags&recFlagChunked != 0 }

// lateTable: a chunked record summed chunks first (see above).
func (h *recHeader) lateTable() bool { return h.Flags&recFlagLateTable != 0 }

// appendRecord appends the full record for h and payload to dst.
func appendRecord(dst []byte, h recHeader, payload []byte) []byte {
	head, tail := recordParts(h, payload)
	return append(append(append(dst, head...), payload...), tail...)
}

// recordParts returns the header and the trailer (checksum) of the record
// for h and payload: written around the payload, without copying it (a
// big fulltext's payload is hundreds of MiB).
func recordParts(h recHeader, payload []byte) (head, tail []byte) {
	head = recordHead(h, len(payload))
	if h.lateTable() {
		// A payload whose table does not fit is summed whole after the
		// header; decodeRecord refuses it anyway.
		tl, err := chunkTableLen(payload, uint64(len(payload)))
		if err != nil {
			tl = 0
		}
		return head, recordSum(payload[tl:], head, payload[:tl])
	}
	return head, recordSum(head, payload)
}

// recordHead returns the header of the record for h with a payload of n
// bytes.
func recordHead(h recHeader, n int) []byte {
	head := make([]byte, 0, recHeaderLen)
	head = append(head, recMagic...)
	head = append(head, recVersion, h.Flags, 0, 0)
	head = binary.BigEndian.AppendUint64(head, uint64(h.ID.File))
	head = binary.BigEndian.AppendUint32(head, uint32(h.ID.Rev))
	head = binary.BigEndian.AppendUint32(head, uint32(n))
	return binary.BigEndian.AppendUint64(head, h.TextLen)
}

// recordSum returns the trailer of a record whose header and payload
// are parts, in order.
func recordSum(parts ...[]byte) []byte {
	d := xxhash.New()
	for _, p := range parts {
		d.Write(p)
	}
	return binary.BigEndian.AppendUint64(nil, d.Sum64())
}

// parseHeader decodes a record header, without the checksum.
func parseHeader(b []byte) (recHeader, error) {
	var h recHeader
	if len(b) < recHeaderLen {
		return h, fmt.Errorf("%w: short header (%d bytes)", errRecord, len(b))
	}
	if string(b[:4]) != recMagic {
		return h, fmt.Errorf("%w: bad magic %q", errRecord, b[:4])
	}
	if b[4] != recVersion {
		return h, fmt.Errorf("%w: version %d", errRecord, b[4])
	}
	h.Flags = b[5]
	if h.Flags&^recFlagsAll != 0 || h.chunked() && h.Flags&^recFlagLateTable != recFlagChunked ||
		h.lateTable() && !h.chunked() || b[6] != 0 || b[7] != 0 {
		return h, fmt.Errorf("%w: flags %#x %#x%02x", errRecord, h.Flags, b[6], b[7])
	}
	h.ID.File = index.FileID(binary.BigEndian.Uint64(b[8:]))
	h.ID.Rev = index.Rev(binary.BigEndian.Uint32(b[16:]))
	h.PayloadLen = binary.BigEndian.Uint32(b[20:])
	h.TextLen = binary.BigEndian.Uint64(b[24:])
	if h.PayloadLen > maxPayload {
		return h, fmt.Errorf("%w: payload length %d", errRecord, h.PayloadLen)
	}
	return h, nil
}

// decodeRecord checks that b is exactly one valid record and returns its
// header and payload (aliasing b).
func decodeRecord(b []byte) (recHeader, []byte, error) {
	h, err := parseHeader(b)
	if err != nil {
		return h, nil, err
	}
	n := recOverhead + int(h.PayloadLen)
	if len(b) != n {
		return h, nil, fmt.Errorf("%w: %d bytes, header says %d", errRecord, len(b), n)
	}
	body := b[:n-recTrailerLen]
	var want uint64
	if p := body[recHeaderLen:]; h.lateTable() {
		tl, err := chunkTableLen(p, uint64(len(p)))
		if err != nil {
			return h, nil, fmt.Errorf("%w: %w", errRecord, err)
		}
		want = binary.BigEndian.Uint64(recordSum(p[tl:], body[:recHeaderLen], p[:tl]))
	} else {
		want = xxhash.Sum64(body)
	}
	if sum := binary.BigEndian.Uint64(b[n-recTrailerLen:]); sum != want {
		return h, nil, fmt.Errorf("%w: checksum mismatch", errRecord)
	}
	return h, body[recHeaderLen:], nil
}
