package workload

import "fmt"

// MiB is 2^20 bytes.
const MiB = 1 << 20

// Chain is a delta workload: a base revision and Steps further revisions,
// each to be encoded against the one before it. A single base/target pair
// is a chain of one step.
type Chain struct {
	Name     string
	Doc      string // one line for the report
	Seed     uint64
	BaseSize int
	Steps    int
	// Unrelated makes every step a fresh text of BaseSize bytes instead of
	// an edit of the previous revision.
	Unrelated bool
	// Edits is how each step edits the previous revision.
	Edits EditSpec
	// CountMin, if set, draws the number of edits per step uniformly from
	// CountMin..Edits.Count instead of always Edits.Count.
	CountMin int
}

// DeltaChains lists the four delta workloads of issue 2 in report order.
func DeltaChains() []Chain {
	return []Chain{
		// D1: a 16 MiB text with 1-5 small edits spread over it.
		{Name: "D1", Doc: "16 MiB text, 1-5 random edits of 10-500 B",
			Seed: 1, BaseSize: 16 * MiB, Steps: 1,
			Edits: EditSpec{Count: 5, MinLen: 10, MaxLen: 500}, CountMin: 1},
		// D2: the same, edits clustered in one 64 KiB region.
		{Name: "D2", Doc: "16 MiB text, 1-5 edits of 10-500 B within 64 KiB",
			Seed: 2, BaseSize: 16 * MiB, Steps: 1,
			Edits: EditSpec{Count: 5, MinLen: 10, MaxLen: 500, Region: 64 << 10}, CountMin: 1},
		// D3: unrelated 1 MiB base and target.
		{Name: "D3", Doc: "unrelated 1 MiB base and target",
			Seed: 3, BaseSize: 1 * MiB, Steps: 1, Unrelated: true},
		// D4: 100 revisions of a 16 MiB file, each a small edit of the previous.
		{Name: "D4", Doc: "16 MiB text, 100 revisions of 1-5 edits each, chained n against n-1",
			Seed: 4, BaseSize: 16 * MiB, Steps: 100,
			Edits: EditSpec{Count: 5, MinLen: 10, MaxLen: 500}, CountMin: 1},
	}
}

// ChainByName returns the delta workload called name.
func ChainByName(name string) (Chain, bool) {
	for _, c := range DeltaChains() {
		if c.Name == name {
			return c, true
		}
	}
	return Chain{}, false
}

// Walk generates revision 0 (the base) and then each step, calling fn with
// the revision number and its bytes. fn must not modify rev; rev stays
// valid after fn returns. Walk stops at fn's first error and returns it.
func (c Chain) Walk(fn func(n int, rev []byte) error) error {
	t := NewText(c.Seed)
	rev := t.Fill(c.BaseSize)
	if err := fn(0, rev); err != nil {
		return fmt.Errorf("%s rev 0: %w", c.Name, err)
	}
	for n := 1; n <= c.Steps; n++ {
		rev = c.step(t, rev)
		if err := fn(n, rev); err != nil {
			return fmt.Errorf("%s rev %d: %w", c.Name, n, err)
		}
	}
	return nil
}

// step makes the next revision from prev.
func (c Chain) step(t *Text, prev []byte) []byte {
	if c.Unrelated {
		return t.Fill(c.BaseSize)
	}
	spec := c.Edits
	if c.CountMin > 0 && c.CountMin < spec.Count {
		spec.Count = c.CountMin + t.Rand().IntN(spec.Count-c.CountMin+1)
	}
	return ApplyEdits(prev, t.Edits(len(prev), spec))
}
