package objstore

import (
	"testing"

	"github.com/deltafs/deltafs/index"
)

// fakeChain is a chain table: per base revision, its chain length, bytes
// and whether it is a snapshot, as the index would report them.
type fakeChain struct {
	len   uint32
	bytes uint64
	snap  bool
}

var chainTable = map[index.Rev]fakeChain{
	0:  {0, 3000, true},      // fulltext
	1:  {1, 3100, false},     // short delta chain
	2:  {1000, 9000, false},  // at the length cap
	3:  {5, 19_990, false},   // nearly at the read cap
	4:  {1, 3400, true},      // intermediate snapshot
	10: {50, 200_000, false}, // far beyond the read cap
}

func cand(role Role, rev index.Rev, delta int64) Candidate {
	c := chainTable[rev]
	return Candidate{Role: role, Base: index.RevID{File: 1, Rev: rev},
		BaseChainLen: c.len, BaseChainBytes: c.bytes, BaseIsSnapshot: c.snap, DeltaLen: delta}
}

// both is a two-base candidate whose union graph has the chain facts of
// rev and whose read holds held bytes at most.
func both(rev index.Rev, held uint64, delta int64) Candidate {
	c := cand(RoleP1P2, rev, delta)
	c.Base2, c.Held = index.RevID{File: 1, Rev: 99}, held
	return c
}

func TestSelectBase(t *testing.T) {
	caps := Caps{MaxChainLen: 1000, MaxReadRatio: 2, MinReadBytes: 4096, MaxHeldRatio: 4}
	target := Target{TextLen: 10_000, FullLen: 4000} // read limit 20,000
	type want struct {
		choice  int
		inter   bool
		reasons []string
	}
	tests := []struct {
		name  string
		cands []Candidate
		want  want
	}{
		{"no candidates: fulltext", nil, want{-1, false, nil}},
		{"p1 only", []Candidate{cand(RoleP1, 1, 50)}, want{0, false, []string{""}}},
		{"p2 closer wins", []Candidate{cand(RoleP1, 1, 900), cand(RoleP2, 0, 40)},
			want{1, false, []string{RuleNotSmallest, ""}}},
		{"tie keeps p1", []Candidate{cand(RoleP1, 1, 40), cand(RoleP2, 0, 40)},
			want{0, false, []string{"", RuleNotSmallest}}},
		{"delta larger than text", []Candidate{cand(RoleP1, 1, 4000)}, want{-1, false, []string{RuleLargerThanText}}},
		{"chain too long", []Candidate{cand(RoleP1, 2, 10)}, want{-1, false, []string{RuleChainTooLong}}},
		{"chain too long falls back to p2", []Candidate{cand(RoleP1, 2, 10), cand(RoleP2, 1, 500)},
			want{1, false, []string{RuleChainTooLong, ""}}},
		{"read cap counts the new delta", []Candidate{cand(RoleP1, 3, 20)}, want{-1, false, []string{RuleReadsTooMuch}}},
		{"base already over the read cap", []Candidate{cand(RoleP1, 10, 1)}, want{-1, false, []string{RuleReadsTooMuch}}},
		{"not computed", []Candidate{cand(RoleHint, 1, -1)}, want{-1, false, []string{RuleNotComputed}}},
		{"both parents when smaller", []Candidate{cand(RoleP1, 1, 300), cand(RoleP2, 0, 200), both(1, 40_000, 60)},
			want{2, false, []string{RuleNotSmallest, RuleNotSmallest, ""}}},
		{"both parents over the held cap", []Candidate{cand(RoleP1, 1, 300), both(1, 40_001, 60)},
			want{0, false, []string{"", RuleHoldsTooMuch}}},
		{"both parents: union chain too long", []Candidate{cand(RoleP2, 1, 300), both(2, 30_000, 60)},
			want{0, false, []string{"", RuleChainTooLong}}},
		{"both parents: union reads too much", []Candidate{both(3, 30_000, 20)},
			want{-1, false, []string{RuleReadsTooMuch}}},
		{"carried delta chosen when smallest", []Candidate{cand(RoleP1, 1, 90), cand(RoleCarried, 1, 60)},
			want{1, false, []string{RuleNotSmallest, ""}}},
		{"snapshot becomes intermediate when parents fail",
			[]Candidate{cand(RoleP1, 2, 10), cand(RoleSnapshot, 4, 1000)}, // 1000 <= 10000>>2
			want{1, true, []string{RuleChainTooLong, ""}}},
		{"snapshot delta too big for its depth stays ordinary",
			[]Candidate{cand(RoleP1, 2, 10), cand(RoleSnapshot, 4, 3000)}, // 3000 > 10000>>2
			want{1, false, []string{RuleChainTooLong, ""}}},
		{"a snapshot that fits its depth beats a smaller one that does not",
			[]Candidate{cand(RoleP1, 2, 10), cand(RoleSnapshot, 4, 2600), cand(RoleSnapshot, 0, 2700)}, // 2600 > 10000>>2; 2700 <= 10000>>1
			want{2, true, []string{RuleChainTooLong, RuleSnapshotFirst, ""}}},
		{"snapshot wins on size but a parent passed: not intermediate",
			[]Candidate{cand(RoleP1, 1, 900), cand(RoleSnapshot, 0, 100)},
			want{1, false, []string{RuleNotSmallest, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := SelectBase(target, tt.cands, caps)
			if d.Choice != tt.want.choice || d.Intermediate != tt.want.inter {
				t.Fatalf("choice %d inter %v, want %d %v (tried %+v)", d.Choice, d.Intermediate, tt.want.choice, tt.want.inter, d.Tried)
			}
			if len(d.Tried) != len(tt.want.reasons) {
				t.Fatalf("tried %+v", d.Tried)
			}
			for i, r := range tt.want.reasons {
				if d.Tried[i].Reason != r {
					t.Errorf("candidate %d (%v): reason %q, want %q", i, d.Tried[i].Role, d.Tried[i].Reason, r)
				}
			}
		})
	}
}

func TestSelectBaseTinyTextUsesReadFloor(t *testing.T) {
	caps := Caps{MaxChainLen: 1000, MaxReadRatio: 2, MinReadBytes: 4096}
	// A 100-byte text: 2x would allow 200 bytes, less than one record
	// header pair; the floor lets it delta.
	d := SelectBase(Target{TextLen: 100, FullLen: 150}, []Candidate{{Role: RoleP1, Base: index.RevID{File: 1}, BaseChainBytes: 150, BaseIsSnapshot: true, DeltaLen: 50}}, caps)
	if d.Choice != 0 {
		t.Fatalf("tried %+v", d.Tried)
	}
}
