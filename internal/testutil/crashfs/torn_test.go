package crashfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestTornWrites: with TornSeed, a file's unsynced writes survive a
// crash in part: each 4 KiB sector holds its durable content or its
// newest, never anything else; the size is the durable one or the
// newest. Over several seeds, some sectors are kept and some lost, and
// both sizes are seen. Without tearing, nothing unsynced survives.
func TestTornWrites(t *testing.T) {
	const old, grown = 5 * pageSize / 2, 4 * pageSize // 2.5 pages synced, then 4 pages
	oldData := bytes.Repeat([]byte{'o'}, old)
	newData := bytes.Repeat([]byte{'n'}, grown)
	kept, lost := 0, 0
	sizes := map[int]bool{}
	for seed := uint64(0); seed < 6; seed++ {
		f := MountT(t, Options{TornSeed: seed})
		p := filepath.Join(f.Dir(), "f")
		writeFile(t, p, oldData, true)
		syncDir(t, f.Dir())
		fh, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt(newData, 0); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		img := crash(t, f)
		st, err := f.Stats()
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(img, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if seed == 0 {
			// No tearing: only the synced content.
			if !bytes.Equal(got, oldData) {
				t.Fatalf("seed 0 (no tearing): %d bytes, want the %d synced", len(got), old)
			}
			continue
		}
		if len(got) != old && len(got) != grown {
			t.Fatalf("seed %d: size %d, want %d or %d", seed, len(got), old, grown)
		}
		sizes[len(got)] = true
		if grew := len(got) == grown; grew != (st.TornSizes == 1) {
			t.Errorf("seed %d: size %d, but Stats.TornSizes is %d", seed, len(got), st.TornSizes)
		}
		keptBefore := kept
		for s := 0; s < len(got); s += sectorSize {
			sec := got[s : s+sectorSize]
			var was []byte
			if s < old {
				was = oldData[s : s+sectorSize]
			} else {
				was = make([]byte, sectorSize) // never synced: zeros
			}
			switch {
			case bytes.Equal(sec, newData[s:s+sectorSize]):
				kept++
			case bytes.Equal(sec, was):
				lost++
			default:
				t.Fatalf("seed %d: sector at %d holds neither its old nor its new content: %q", seed, s, trim(sec))
			}
		}
		// Sectors kept past the size kept do not show.
		if len(got) == grown && kept-keptBefore != st.TornSectors {
			t.Errorf("seed %d: %d sectors show the new content, Stats.TornSectors is %d", seed, kept-keptBefore, st.TornSectors)
		}
	}
	if kept == 0 || lost == 0 || len(sizes) != 2 {
		t.Errorf("over 5 seeds: %d sectors kept, %d lost, sizes %v: the tearing is not random", kept, lost, sizes)
	}
}
