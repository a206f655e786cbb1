// Package delta encodes and applies binary deltas: the difference between a
// base and a target, such that Apply(base, Encode(base, target)) == target.
//
// It owns the delta byte format and nothing else: no I/O, no compression
// policy, no knowledge of files or revisions. Every function is pure and safe
// for concurrent use. Apply never panics and never reads or writes out of
// bounds, whatever bytes it is given: a truncated, corrupted or hostile delta
// returns an error that matches ErrCorrupt.
//
// # Cost follows the change
//
// Encoding first trims the common head and tail of base and target at
// memory-compare speed. What is left is matched greedily: while target and
// base agree, matches are extended eight (and, in bulk, hundreds of) bytes at a
// time; where they diverge, the encoder resynchronises against a small hash
// table built over a few KiB of base around the point of divergence, because
// most edits are local. Only when that fails does it build (once, lazily) a
// hash index over the untrimmed part of the base. A 1-byte change in a
// 100 MiB file therefore costs about one pass of memcmp and a few microseconds
// of hashing, and yields a delta of tens of bytes.
//
// A writer that changed a file in place knows which bytes it wrote:
// EncodeWrites builds the delta from those spans alone, reading nothing else.
//
// A store that deltas revision n+1 against n and then n+2 against n+1 can
// build an Index once per base with NewIndex and keep it for the next target:
// Index.Encode trims the same way and never rebuilds the index.
//
// Memory: the index holds one uint32 per power-of-two slot, at most two slots
// per 16-byte block of the indexed region, so it is bounded by half the size of
// the region it covers (the untrimmed middle for Encode, the whole base for
// NewIndex). Encode allocates nothing else but its output.
//
// # Format
//
// Every delta starts with a codec byte, then two unsigned LEB128 varints:
//
//	codec     byte     1 = copy/insert (CodecCopy), 2 = zstd with the base as raw dictionary (CodecZstd)
//	baseLen   uvarint  length of the base the delta was made against
//	targetLen uvarint  length of the target it produces
//
// A CodecCopy body is a sequence of instructions, running to the end of the delta:
//
//	uvarint h             n = h>>2 is the length, n > 0; h&3 is the opcode
//	  h&3 == 0: insert    n literal bytes follow
//	  h&3 == 1: copy      a zigzag varint d follows; copy n bytes of base from
//	                      offset off = end + d, where end is the base offset
//	                      just past the previous copy (0 at the start)
//	  h&3 == 2: run       one byte v follows; n copies of v (a file's holes
//	                      and zero-filled extensions cost a few bytes)
//	  h&3 == 3:           reserved; rejected
//
// Relative copy offsets keep the common case, a copy that resumes just after
// an edit, at one or two bytes. A CodecCopy delta is not compressed: the store
// compresses it as a whole, which squeezes inserted text far better than any
// per-instruction scheme would.
//
// A CodecZstd body is one zstd frame made with the whole base as a raw
// dictionary (dictionary ID 1), the pure-Go equivalent of `zstd --patch-from`.
// It compresses inserted text well but costs about 100 bytes per MB of input
// even for tiny edits, and its encoder reads the whole base, so callers that
// care should try both codecs and keep the smaller (see EncodeZstd). Its
// encoder's hash tables have a fixed size, so on bases of many MiB it loses
// most long matches (16 MiB base, 5 small edits: 482 KB at level 3, against
// 255 bytes for CodecCopy); it pays off on small bases and heavy rewrites.
//
// The decoder rejects: an unknown codec or opcode; a baseLen different from the base it
// is given; a zero-length instruction; a copy outside the base; an insert that
// runs past the end of the delta; instructions producing more or fewer bytes
// than targetLen; and varints that overflow. It validates the whole
// instruction stream before it allocates the target, so a hostile header
// cannot make it allocate more than the instructions really produce.
package delta
