package objstore

// bigFull is the fulltext size from which compressFull trades ratio for
// speed: such a text is stored chunked (chunked.go), its chunks encoded
// with S2 on every core, each one raw when it does not compress (media,
// archives, encrypted data). A fulltext this large is recorded while its
// writer may wait (fsync of a file the recorder holds no longer, a
// snapshot, unmount): M1's 1 GiB new file took 40 s of CPU at zstd's
// better level, ~10 s at its fastest (streaming, one block at a time).
const bigFull = 32 << 20

// compressBig encodes a fulltext of at least bigFull bytes, or returns it
// raw if that is not smaller.
func compressBig(data []byte) ([]byte, byte) {
	if p, ok := encodeChunked(data); ok {
		return p, recFlagChunked
	}
	return data, 0
}
