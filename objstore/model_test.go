package objstore

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/deltafs/deltafs/delta"
	"github.com/deltafs/deltafs/index"
	"pgregory.net/rapid"
)

// storeModel checks the store against a map of every text ever put, through
// random puts (new, edited, duplicated, merged, carried), reads and reopens.
// rapid prints the failing seed; replay with -rapid.seed=N.
type storeModel struct {
	dir   string
	cfg   Config
	s     *Store
	texts map[index.FileID][][]byte
	files []index.FileID
}

func TestStoreModel(t *testing.T) {
	// Every check opens a store and fsyncs each put: 25 checks unless
	// -rapid.checks asks for more (the default 100 takes over a minute).
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		f.Value.Set("25")
		defer f.Value.Set(f.DefValue)
	}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "objstore-model")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		m := &storeModel{dir: dir, texts: map[index.FileID][][]byte{}, cfg: Config{
			MaxChainLen: uint32(rapid.IntRange(1, 8).Draw(rt, "maxChain")),
			P1Only:      rapid.Bool().Draw(rt, "p1only"),
			CacheBytes:  int64(rapid.IntRange(1, 64<<10).Draw(rt, "cache")),
			SegmentSize: int64(rapid.IntRange(1<<10, 64<<10).Draw(rt, "segment")),
		}}
		cfg := m.cfg
		cfg.Create = true
		if m.s, err = Open(dir, cfg); err != nil {
			rt.Fatal(err)
		}
		defer func() { m.s.Close() }()
		rt.Repeat(map[string]func(*rapid.T){
			"newfile": m.newFile,
			"put":     m.put,
			"get":     m.get,
			"reopen":  m.reopen,
			"":        m.check,
		})
		n, err := m.s.Verify(context.Background(), func(p Problem) { rt.Errorf("verify: %v", p) })
		if n != 0 || err != nil {
			rt.Fatalf("verify: %d problems, %v", n, err)
		}
	})
}

func (m *storeModel) newFile(t *rapid.T) {
	f, err := m.s.NewFile(fmt.Sprint(len(m.files)))
	if err != nil {
		t.Fatal(err)
	}
	m.files = append(m.files, f)
}

// anyRev draws an existing revision, or null if there is none.
func (m *storeModel) anyRev(t *rapid.T, label string) index.RevID {
	var all []index.RevID
	for _, f := range m.files {
		for r := range m.texts[f] {
			all = append(all, index.RevID{File: f, Rev: index.Rev(r)})
		}
	}
	if len(all) == 0 {
		return index.NullRev
	}
	return rapid.SampledFrom(all).Draw(t, label)
}

func (m *storeModel) text(id index.RevID) []byte { return m.texts[id.File][id.Rev] }

func (m *storeModel) put(t *rapid.T) {
	if len(m.files) == 0 {
		t.Skip("no files")
	}
	f := rapid.SampledFrom(m.files).Draw(t, "file")
	r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
	req := PutRequest{File: f}
	if n := len(m.texts[f]); n > 0 && rapid.IntRange(0, 3).Draw(t, "p1") > 0 {
		req.P1 = index.RevID{File: f, Rev: index.Rev(rapid.IntRange(0, n-1).Draw(t, "p1rev"))}
	}
	src := m.anyRev(t, "source")
	switch k := rapid.IntRange(0, 4).Draw(t, "content"); {
	case src.IsNull() || k == 0:
		req.Data = genText(r, rapid.IntRange(0, 3000).Draw(t, "size"))
	case k == 1:
		req.Data = bytes.Clone(m.text(src)) // a duplicate: dedup
	default:
		req.Data = edit(r, m.text(src), rapid.IntRange(1, 5).Draw(t, "edits"))
	}
	if !src.IsNull() && rapid.Bool().Draw(t, "p2") {
		req.P2 = src
	}
	if h := m.anyRev(t, "hint"); !h.IsNull() && rapid.Bool().Draw(t, "usehint") {
		req.Hints = []index.RevID{h}
	}
	if !src.IsNull() && rapid.Bool().Draw(t, "carry") {
		req.Delta, req.DeltaBase = delta.Encode(m.text(src), req.Data), src
		if rapid.Bool().Draw(t, "bogus") {
			req.Delta = delta.Encode(m.text(src), append(bytes.Clone(req.Data), 'x'))
		}
	}
	e, err := m.s.Put(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if e.Rev != index.Rev(len(m.texts[f])) {
		t.Fatalf("put got rev %d, want %d", e.Rev, len(m.texts[f]))
	}
	if e.ChainLen > m.s.caps.MaxChainLen || e.ChainBytes > m.s.caps.readLimit(e.Size) {
		t.Fatalf("caps broken: %+v", e)
	}
	m.texts[f] = append(m.texts[f], req.Data)
}

func (m *storeModel) get(t *rapid.T) {
	id := m.anyRev(t, "get")
	if id.IsNull() {
		t.Skip("no revisions")
	}
	got, err := m.s.Get(context.Background(), id)
	if err != nil || !bytes.Equal(got, m.text(id)) {
		t.Fatalf("get %v: %v", id, err)
	}
}

func (m *storeModel) reopen(t *rapid.T) {
	if err := m.s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(m.dir, m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.s = s
}

func (m *storeModel) check(t *rapid.T) {
	for _, f := range m.files {
		meta, err := m.s.File(f)
		if err != nil || int(meta.Revs) != len(m.texts[f]) {
			t.Fatalf("file %d: %+v %v, model has %d revisions", f, meta, err, len(m.texts[f]))
		}
	}
}
