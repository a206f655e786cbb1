package index

import (
	"encoding/binary"
	"fmt"
)

// FileMeta is the per-file record.
type FileMeta struct {
	Name     string
	Revs     uint32 // number of revisions; the next one is Rev(Revs)
	LastSnap Rev    // latest snapshot (fulltext or intermediate) revision
	HasSnap  bool   // whether LastSnap is set
}

// Tail is the committed end of the segment data: every entry's record lies
// before it.
type Tail struct {
	Seg uint32
	End uint64
}

const metaVersion = 1

// MarshalBinary encodes m.
func (m *FileMeta) MarshalBinary() ([]byte, error) {
	b := []byte{metaVersion}
	b = binary.AppendUvarint(b, uint64(len(m.Name)))
	b = append(b, m.Name...)
	b = binary.AppendUvarint(b, uint64(m.Revs))
	snap := uint64(0)
	if m.HasSnap {
		snap = uint64(m.LastSnap) + 1
	}
	return binary.AppendUvarint(b, snap), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote.
func (m *FileMeta) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.byte(); v != metaVersion {
		return fmt.Errorf("%w: file meta version %d", ErrDecode, v)
	}
	name := d.bytes(1 << 16)
	revs := d.uvarint(1<<32 - 1)
	snap := d.uvarint(1 << 32)
	if err := d.finish(); err != nil {
		return err
	}
	if snap > revs {
		return fmt.Errorf("%w: snapshot %d beyond %d revisions", ErrDecode, snap-1, revs)
	}
	*m = FileMeta{Name: string(name), Revs: uint32(revs), HasSnap: snap > 0}
	if m.HasSnap {
		m.LastSnap = Rev(snap - 1)
	}
	return nil
}

func encodeTail(t Tail) []byte {
	b := binary.BigEndian.AppendUint32(nil, t.Seg)
	return binary.BigEndian.AppendUint64(b, t.End)
}

func decodeTail(b []byte) (Tail, error) {
	if len(b) != 12 {
		return Tail{}, fmt.Errorf("%w: tail of %d bytes", ErrDecode, len(b))
	}
	return Tail{Seg: binary.BigEndian.Uint32(b), End: binary.BigEndian.Uint64(b[4:])}, nil
}
