package crashfs

import (
	"math/rand/v2"
	"slices"
	"sort"
)

// sectorSize is the unit a torn write keeps or loses: what a disk
// writes atomically.
const sectorSize = 4096

// tear applies Options.TornSeed at a crash: besides what was fsynced,
// some of what was written since reached the disk before the power went
// out. Each regular file's pages written since its last fsync are each,
// at random, lost, kept whole, or kept in part (a random subset of its
// sectors); and a file that grew since keeps its new size half the time,
// its new bytes then being whatever of them was kept (zeros, or the old
// content, elsewhere): a disk's writeback that had not finished, and a
// file system that committed a size before all of its data. A file
// truncated since its last fsync is left as the strict model has it.
// Directory entries are not torn. Called with f.mu held.
func (f *fsys) tear(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x70726e))
	seen := map[*obj]bool{}
	var walk func(d *obj)
	walk = func(d *obj) {
		for _, ents := range []map[string]*obj{d.ents, d.dents} {
			names := make([]string, 0, len(ents))
			for name := range ents {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				o := ents[name]
				if seen[o] {
					continue
				}
				seen[o] = true
				if o.dir {
					walk(o)
				} else {
					o.tear(r, &f.stats)
				}
			}
		}
	}
	seen[f.root] = true
	walk(f.root)
}

// tear keeps some of o's unsynced writes in its durable state (see
// fsys.tear).
func (o *obj) tear(r *rand.Rand, st *Stats) {
	if o.cut >= 0 || len(o.dirty) == 0 && o.size <= o.dsize {
		return
	}
	dirty := make([]int, 0, len(o.dirty))
	for i := range o.dirty {
		dirty = append(dirty, i)
	}
	sort.Ints(dirty)
	for _, i := range dirty {
		if i >= len(o.pages) {
			continue
		}
		how := r.IntN(3)
		if how == 0 {
			continue
		}
		for len(o.dpages) <= i {
			o.dpages = append(o.dpages, nil)
		}
		d := slices.Clone(o.dpages[i])
		if d == nil {
			d = make([]byte, pageSize)
		}
		cur := o.pages[i]
		for s := 0; s < pageSize; s += sectorSize {
			if how == 1 || r.IntN(2) == 0 {
				st.TornSectors++
				if cur == nil {
					clear(d[s : s+sectorSize])
				} else {
					copy(d[s:s+sectorSize], cur[s:s+sectorSize])
				}
			}
		}
		o.dpages[i] = d
	}
	if o.size > o.dsize && r.IntN(2) == 0 {
		o.dsize = o.size
		st.TornSizes++
	}
}
