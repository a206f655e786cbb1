package objstore

import (
	"fmt"

	"github.com/deltafs/deltafs/index"
)

// Role says where a base candidate comes from.
type Role uint8

// Candidate roles, in the order ties are broken.
const (
	RoleP1       Role = iota + 1 // first parent
	RoleP2                       // second parent
	RoleCarried                  // a delta the caller carried in, stored verbatim if chosen
	RoleHint                     // a caller hint, e.g. a copy source
	RoleSnapshot                 // the file's latest snapshot (fulltext or intermediate)
	RoleP1P2                     // both parents: a delta against Base's text then Base2's (graph.go)
)

var roleNames = [...]string{"", "p1", "p2", "carried", "hint", "snapshot", "p1+p2"}

func (r Role) String() string {
	if int(r) < len(roleNames) && r != 0 {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Rejection rules, named as in Mercurial's delta search.
const (
	RuleChainTooLong   = "chain too long"
	RuleReadsTooMuch   = "chain reads more than the read cap"
	RuleHoldsTooMuch   = "graph read holds more than the held cap"
	RuleLargerThanText = "delta larger than text"
	RuleNotComputed    = "delta not computed" // e.g. a carried delta covers its base
	RuleNotSmallest    = "a smaller delta passed"
	RuleSnapshotFirst  = "an intermediate snapshot was preferred"
)

// Caps bound delta chains. See the defaults in config.go.
type Caps struct {
	MaxChainLen  uint32  // deltas applied to rebuild a revision
	MaxReadRatio float64 // chain bytes read / fulltext length
	MinReadBytes uint64  // read budget floor, so tiny texts may still delta
	// MaxHeldRatio bounds what a graph read (a two-base record's, see
	// graph.go) holds at once: its texts' bytes / the revision's length.
	MaxHeldRatio float64
}

// Candidate is one possible delta base with the facts selection needs.
type Candidate struct {
	Role           Role
	Base           index.RevID
	BaseChainLen   uint32 // deltas applied to rebuild the base
	BaseChainBytes uint64 // bytes read to rebuild the base
	BaseIsSnapshot bool   // base is a fulltext or an intermediate snapshot
	DeltaLen       int64  // stored bytes of the delta record; <0 if not computed

	// A two-base candidate (RoleP1P2) also has a second base; its chain
	// facts count the distinct records of both bases' graphs, and Held
	// is the most text bytes its graph read holds at once (0 for any
	// other candidate, whose read holds two texts).
	Base2 index.RevID
	Held  uint64
}

// Target describes the revision being stored.
type Target struct {
	TextLen uint64 // fulltext length
	FullLen uint64 // stored bytes of its fulltext record (compressed)
}

// Attempt records what selection made of one candidate.
type Attempt struct {
	Role     Role
	Base     index.RevID
	DeltaLen int64
	Reason   string // empty for the chosen candidate
}

// Decision is the outcome of SelectBase.
type Decision struct {
	Choice       int  // index into the candidates, -1 for a fulltext
	Intermediate bool // store the choice as an intermediate snapshot
	Tried        []Attempt
}

// readLimit is the most bytes a chain may read to rebuild a text of n bytes.
func (c Caps) readLimit(n uint64) uint64 {
	return max(uint64(c.MaxReadRatio*float64(n)), c.MinReadBytes)
}

// ChainRule returns the rule a candidate's chain breaks whatever its delta
// (empty if none), so callers can skip computing deltas that cannot pass.
func ChainRule(c Candidate, t Target, caps Caps) string {
	switch {
	case c.BaseChainLen+1 > caps.MaxChainLen:
		return RuleChainTooLong
	case c.BaseChainBytes > caps.readLimit(t.TextLen):
		return RuleReadsTooMuch
	case c.Held > max(uint64(caps.MaxHeldRatio*float64(t.TextLen)), caps.MinReadBytes):
		return RuleHoldsTooMuch
	}
	return ""
}

// rule returns why candidate c cannot be used, or "".
func rule(c Candidate, t Target, caps Caps) string {
	if r := ChainRule(c, t, caps); r != "" {
		return r
	}
	switch {
	case c.DeltaLen < 0:
		return RuleNotComputed
	case uint64(c.DeltaLen) >= t.FullLen:
		return RuleLargerThanText
	case c.BaseChainBytes+uint64(c.DeltaLen) > caps.readLimit(t.TextLen):
		return RuleReadsTooMuch
	}
	return ""
}

// SelectBase picks the smallest delta that passes the caps, or a fulltext.
// It is pure: everything it knows comes from its arguments.
//
// When no parent, hint or carried delta passes, the snapshot candidates
// decide (sparse-revlog style): the smallest delta against a snapshot that
// is at most TextLen >> depth bytes is stored as an intermediate snapshot,
// so long histories grow shallow snapshot trees instead of new fulltexts;
// failing that, the smallest passing snapshot delta is stored as an ordinary
// delta against it.
func SelectBase(t Target, cands []Candidate, caps Caps) Decision {
	d := Decision{Choice: -1, Tried: make([]Attempt, len(cands))}
	var passing []int
	parentPassed := false
	for i, c := range cands {
		d.Tried[i] = Attempt{Role: c.Role, Base: c.Base, DeltaLen: c.DeltaLen, Reason: rule(c, t, caps)}
		if d.Tried[i].Reason == "" {
			passing = append(passing, i)
			parentPassed = parentPassed || c.Role != RoleSnapshot
		}
	}
	pick := func(ok func(Candidate) bool) int {
		best := -1
		for _, i := range passing {
			if ok(cands[i]) && (best < 0 || cands[i].DeltaLen < cands[best].DeltaLen) {
				best = i
			}
		}
		return best
	}
	d.Choice = pick(func(Candidate) bool { return true })
	if !parentPassed {
		if i := pick(func(c Candidate) bool { return fitsDepth(c, t) }); i >= 0 {
			d.Choice, d.Intermediate = i, true
		}
	}
	for _, i := range passing {
		switch {
		case i == d.Choice:
		case cands[i].DeltaLen >= cands[d.Choice].DeltaLen:
			d.Tried[i].Reason = RuleNotSmallest
		default:
			d.Tried[i].Reason = RuleSnapshotFirst
		}
	}
	return d
}

// fitsDepth: a snapshot at depth d (the base's snapshot depth plus one) must
// be at most TextLen >> d bytes, so each level of the tree is at least half
// the size of the one above and the whole tree reads less than twice a text.
func fitsDepth(c Candidate, t Target) bool {
	depth := c.BaseChainLen + 1
	return c.Role == RoleSnapshot && c.BaseIsSnapshot && depth < 64 && uint64(c.DeltaLen) <= t.TextLen>>depth
}
