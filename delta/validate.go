package delta

import "fmt"

// Validate checks delta d against a base of baseLen bytes without the base:
// its header, and for a CodecCopy delta every instruction (bounds of copies,
// lengths, the total it produces), exactly as Apply would. A CodecZstd
// delta's frame cannot be checked without its base: only its header is.
// Errors match ErrCorrupt.
func Validate(d []byte, baseLen uint64) error {
	body, c, bl, targetLen, err := parseHeader(d)
	if err != nil {
		return err
	}
	if bl != baseLen {
		return fmt.Errorf("%w: delta wants %d bytes, got %d", ErrBaseMismatch, bl, baseLen)
	}
	if c == CodecZstd {
		return nil
	}
	return walk(body, bl, targetLen, nil)
}
