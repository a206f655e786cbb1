package objstore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// TestPutTimeIsWhenContentWasTaken: a put's PutRequest.Time, when the
// content was taken from its source, is the revision's time on every
// put path (fulltext, dedup, delta-only), stored in the index; a zero
// Time is the put's, and a Time in the future is taken as the put's.
func TestPutTimeIsWhenContentWasTaken(t *testing.T) {
	s, _ := openNew(t, Config{})
	r := rand.New(rand.NewPCG(3, 4))
	f := mustNewFile(t, s, "f")
	g := mustNewFile(t, s, "g")
	text := genText(r, 1<<20)
	taken := time.Now().Add(-time.Hour)
	check := func(what string, e index.Entry, lo, hi time.Time) {
		t.Helper()
		stored, err := s.Entry(e.ID())
		if err != nil {
			t.Fatal(err)
		}
		if e.Time != stored.Time || e.Time < lo.UnixNano() || e.Time > hi.UnixNano() {
			t.Errorf("%s: time %v (stored %v), want within [%v, %v]", what, time.Unix(0, e.Time), time.Unix(0, stored.Time), lo, hi)
		}
	}

	e := mustPut(t, s, PutRequest{File: f, Data: text, Time: taken})
	check("fulltext", e, taken, taken)
	d := mustPut(t, s, PutRequest{File: g, Data: text, Time: taken.Add(time.Second)})
	if d.Kind != index.KindDedup {
		t.Fatalf("second put of the same text: %v, want a dedup", d.Kind)
	}
	check("dedup", d, taken.Add(time.Second), taken.Add(time.Second))
	next, dl := inPlace(t, r, text, 4096)
	e = mustPut(t, s, PutRequest{File: f, P1: e.ID(), Delta: dl, DeltaBase: e.ID(), DeltaOnly: true, Size: uint64(len(next)), Time: taken.Add(2 * time.Second)})
	check("delta-only", e, taken.Add(2*time.Second), taken.Add(2*time.Second))

	before := time.Now()
	e = mustPut(t, s, PutRequest{File: f, Data: edit(r, next, 10), P1: e.ID()})
	check("no Time", e, before, time.Now())
	before = time.Now()
	e = mustPut(t, s, PutRequest{File: f, Data: edit(r, next, 20), P1: e.ID(), Time: time.Now().Add(time.Hour)})
	check("a Time in the future", e, before, time.Now())
	verifyClean(t, s)
}
