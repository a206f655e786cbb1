package fs

import (
	"testing"
	"time"

	"github.com/deltafs/deltafs/index"
)

// TestRevNames: names sort in revision order at every width, carry the
// UTC second, carry the store's revision number (as deltafs log, cat
// --rev and restore --rev do), and parse back to it whatever the padding.
func TestRevNames(t *testing.T) {
	when := time.Date(2026, 11, 29, 23, 15, 2, 0, time.UTC).UnixNano()
	cases := []struct {
		rev  index.Rev
		n    int
		want string
	}{
		{0, 1, "0000@2026-11-29T23:15:02Z"},
		{6, 7, "0006@2026-11-29T23:15:02Z"},
		{9999, 10000, "9999@2026-11-29T23:15:02Z"},
		{9999, 10001, "09999@2026-11-29T23:15:02Z"},
		{10000, 10001, "10000@2026-11-29T23:15:02Z"},
	}
	for _, c := range cases {
		got := revName(Revision{ID: index.RevID{File: 1, Rev: c.rev}, Time: when}, revWidth(c.n))
		if got != c.want {
			t.Errorf("rev %d of %d: %q, want %q", c.rev, c.n, got, c.want)
		}
		rev, at, ok := parseRevName(got)
		if !ok || rev != c.rev || at != "2026-11-29T23:15:02Z" {
			t.Errorf("parse %q: %d %q %v", got, rev, at, ok)
		}
	}
	revs := make([]Revision, 10001)
	for i := range revs {
		revs[i] = Revision{ID: index.RevID{File: 3, Rev: index.Rev(i)}, Time: when + int64(i)*1e9}
	}
	ents := revEntries(revs)
	for i := 1; i < len(ents); i++ {
		if ents[i-1].Name >= ents[i].Name {
			t.Fatalf("%q sorts after %q", ents[i-1].Name, ents[i].Name)
		}
	}
	for _, bad := range []string{"", "@", "x@y", "12345678901@t", "00", "-1@t"} {
		if _, _, ok := parseRevName(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}
