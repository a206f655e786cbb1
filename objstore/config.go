package objstore

import (
	"log/slog"

	"github.com/cespare/xxhash/v2"
)

// Config tunes a Store. The zero value gives the defaults below.
type Config struct {
	Create   bool   // create a new store if dir holds none
	ReadOnly bool   // refuse Put and NewFile
	Holder   string // recorded in the lock file, e.g. the mount point
	Logger   *slog.Logger

	SegmentSize int64 // roll segments past this size; default DefaultSegmentSize
	CacheBytes  int64 // fulltext cache budget; default DefaultCacheBytes
	LatestBytes int64 // budget for the latest fulltext of recently written files

	MaxChainLen  uint32  // default DefaultMaxChainLen
	MaxReadRatio float64 // default DefaultMaxReadRatio
	MaxHeldRatio float64 // default DefaultMaxHeldRatio (graph reads, graph.go)
	NoCaps       bool    // lift both caps (benchmarks only)
	P1Only       bool    // consider only p1 (and snapshots): the S2 comparison

	// FastFulltexts compresses fulltexts at zstd's fastest level instead
	// of the better one: for a writer that must keep up (the mount
	// recording thousands of new files), since puts encode one at a time.
	// On 4-64 KiB of text-like data the fastest level takes 2.4-3.9x less
	// CPU for fulltexts 5-8% larger; a repack recompresses them at the
	// better level (its records are not marked repacked, so --reuse=auto
	// does not keep them).
	FastFulltexts bool

	// hash overrides the content hash (tests force collisions with it);
	// xxhash says it is the default, xxhash.Sum64, which a put may also
	// compute over a file it streams (dedupFrom).
	hash   func([]byte) uint64
	xxhash bool
	// encoders overrides how many goroutines S2-encode a streamed
	// fulltext's chunks (chunked_stream.go); negative: none, every chunk
	// is stored raw (tests).
	encoders int
}

const (
	// DefaultSegmentSize: large enough that a store of many GiB has few
	// hundred files, small enough that a repack can rewrite one at a time.
	DefaultSegmentSize = 256 << 20
	// DefaultCacheBytes holds a handful of large fulltexts, enough that
	// reading neighbouring revisions rebuilds from a cached one.
	DefaultCacheBytes = 64 << 20
	// DefaultLatestBytes keeps the newest fulltext of recently written files
	// so that revision n+1 deltas against n without rebuilding it.
	DefaultLatestBytes = 64 << 20

	// DefaultMaxChainLen caps deltas applied per read. Applying one delta to
	// an 8 MiB text costs ~0.5 ms here (one copy of the text), so the chain
	// length is the read latency. Measured on 600 revisions of an 8 MiB
	// text-like file, 3 line edits each (TestMeasureCaps-style run, cold
	// cache, reads of every 7th revision):
	//
	//	cap   stored     chain max/mean   read p50   read p99
	//	50    1.884 MB   50 / 28          28 ms      81 ms
	//	128   1.874 MB   128 / 62         49 ms      98 ms
	//	1000  1.853 MB   599 / 300        156 ms     310 ms
	//
	// Intermediate snapshots make a short cap nearly free in space (+1% at
	// 128 against 1000, Mercurial's sparse-revlog default) while cutting the
	// worst read 3x; 128 keeps p99 within about 2x of p50.
	DefaultMaxChainLen = 128
	// DefaultMaxReadRatio: the chain's stored bytes may be at most 2x the
	// text (Mercurial's LIMIT_DELTA2TEXT). Reading 2x a text from the page
	// cache is cheaper than the copies of applying; it stops a chain of many
	// medium deltas from reading far more than a fresh fulltext would.
	DefaultMaxReadRatio = 2.0
	// DefaultMaxHeldRatio bounds what a graph read holds at once (see
	// graph.go): texts' bytes / the revision's length. A merge of two
	// lines holds both parents' texts and their concatenation (4x), and
	// the texts of the other line that a later record of the graph still
	// needs add to it. Measured on S2 (600 revisions of a 200 KiB text,
	// 165 merges of two lines that merge each other; a throwaway test
	// walking every revision's graph): uncapped, reads hold a median
	// 6.0x and at most 12.1x the text, the store 209.8 KB; at 8x, max
	// 8.0x and 206.2 KB (123 p1+p2 records); at 6x 218.5 KB, 5x 208.4
	// KB, 4x 216.0 KB (33 p1+p2): the caps move the intermediate
	// snapshots, so the size is not monotonic in the cap, and below 8x
	// most merges lose the two-base record. With twoBaseMaxText (both
	// parents at most 4 MiB) a read holds 32 MiB at most.
	DefaultMaxHeldRatio = 8.0
	// DefaultMinReadBytes lets texts of a few hundred bytes still delta:
	// record headers alone would break 2x of a tiny text.
	DefaultMinReadBytes = 4096

	// zstdTryMin: try the zstd-dictionary codec only when the compressed
	// copy/insert delta exceeds this. Below it the codec can save at most a
	// few hundred bytes, and it reads the whole base (the delta package
	// measures ~100 bytes/MB of overhead for tiny edits), so it would cost
	// time proportional to the file rather than to the change.
	zstdTryMin = 2048
	// zstdTryMaxBase: the zstd codec's fixed hash tables lose long matches
	// on bases of many MiB (delta package: 482 KB vs 255 bytes on 16 MiB), so
	// past this size it is not worth its cost.
	zstdTryMaxBase = 4 << 20
)

func (c Config) withDefaults() Config {
	if c.SegmentSize <= 0 {
		c.SegmentSize = DefaultSegmentSize
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.LatestBytes <= 0 {
		c.LatestBytes = DefaultLatestBytes
	}
	if c.MaxChainLen == 0 {
		c.MaxChainLen = DefaultMaxChainLen
	}
	if c.MaxReadRatio <= 0 {
		c.MaxReadRatio = DefaultMaxReadRatio
	}
	if c.MaxHeldRatio <= 0 {
		c.MaxHeldRatio = DefaultMaxHeldRatio
	}
	if c.NoCaps {
		c.MaxChainLen, c.MaxReadRatio = 1<<31, 1e12
		c.MaxHeldRatio = 1e12
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.hash == nil {
		c.hash, c.xxhash = xxhash.Sum64, true
	}
	return c
}

// Caps returns the chain caps in effect.
func (c Config) Caps() Caps {
	c = c.withDefaults()
	return Caps{MaxChainLen: c.MaxChainLen, MaxReadRatio: c.MaxReadRatio, MinReadBytes: DefaultMinReadBytes,
		MaxHeldRatio: c.MaxHeldRatio}
}
