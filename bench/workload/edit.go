package workload

// Edit is one splice of a byte slice: at Off, Del bytes are removed and
// Ins is inserted. An insert has Del == 0, a delete has no Ins, a replace
// has Del == len(Ins).
type Edit struct {
	Off int
	Del int
	Ins []byte
}

// EditKind names the three kinds of edit the generators produce.
type EditKind uint8

// The edit kinds.
const (
	Insert EditKind = iota
	Delete
	Replace
)

// Kind reports what kind of edit e is.
func (e Edit) Kind() EditKind {
	switch {
	case e.Del == 0:
		return Insert
	case len(e.Ins) == 0:
		return Delete
	default:
		return Replace
	}
}

// Delta is how much e changes the length of the data it applies to.
func (e Edit) Delta() int { return len(e.Ins) - e.Del }

// EditSpec describes a batch of edits: Count edits, each touching
// MinLen..MaxLen bytes. If Region > 0 the edits cluster in one window of
// Region bytes at a random place; otherwise they spread over the whole data.
type EditSpec struct {
	Count  int
	MinLen int
	MaxLen int
	Region int
}

// Edits generates the edits of spec against data of length size, drawing
// positions and inserted text from t. Each edit's Off is relative to the
// data after the previous edits, as ApplyEdits applies them in order.
func (t *Text) Edits(size int, spec EditSpec) []Edit {
	r := t.r
	lo, hi := 0, size
	if spec.Region > 0 && spec.Region < size {
		lo = r.IntN(size - spec.Region)
		hi = lo + spec.Region
	}
	edits := make([]Edit, 0, spec.Count)
	for range spec.Count {
		n := spec.MinLen + r.IntN(spec.MaxLen-spec.MinLen+1)
		hi = min(hi, size)
		span := max(hi-lo-n, 1)
		e := Edit{Off: min(lo+r.IntN(span), size)}
		switch EditKind(r.IntN(3)) {
		case Insert:
			e.Ins = t.Fill(n)
		case Delete:
			e.Del = min(n, size-e.Off)
		case Replace:
			e.Del = min(n, size-e.Off)
			e.Ins = t.Fill(e.Del)
		}
		edits = append(edits, e)
		size += e.Delta()
		hi += e.Delta()
	}
	return edits
}

// ApplyEdits returns a new slice holding data with edits applied in order.
// data is not modified. An edit out of range panics: edits come from
// Edits, never from outside input.
func ApplyEdits(data []byte, edits []Edit) []byte {
	out := data
	for _, e := range edits {
		next := make([]byte, 0, len(out)+len(e.Ins))
		next = append(next, out[:e.Off]...)
		next = append(next, e.Ins...)
		next = append(next, out[e.Off+e.Del:]...)
		out = next
	}
	if len(edits) == 0 {
		out = append([]byte(nil), data...)
	}
	return out
}
