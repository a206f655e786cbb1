package index

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
)

// TreeHash names a directory tree by content: the SHA-256 of its encoding.
// Equal directories share one stored tree, across snapshots too (git's
// trees, ZFS's copy-on-write blocks). SHA-256 rather than xxhash64: a tree
// hash is an identity, and a 64-bit collision would silently show one
// directory's listing in place of another's.
type TreeHash [32]byte

// String gives the hash in hex.
func (h TreeHash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is the zero hash (no tree).
func (h TreeHash) IsZero() bool { return h == TreeHash{} }

// Xattr is one extended attribute of a snapshotted node.
type Xattr struct {
	Name  string
	Value []byte
}

// TreeEntry is one name of a directory as it was at a snapshot: the
// node's attributes and what its content is. A regular file's content is
// the revision Rev (null for an empty file); a directory's is the tree
// Tree; a symlink's is Target.
type TreeEntry struct {
	Name                string
	Mode                uint32 // st_mode, type bits included
	UID, GID            uint32
	Nlink               uint32
	Ino                 uint64 // live inode number: hard links share it
	Rdev                uint64
	Size                uint64
	Atime, Mtime, Ctime int64 // unix nanoseconds
	Rev                 RevID
	Tree                TreeHash
	Target              string
	Xattrs              []Xattr
}

// IsDir, IsRegular and IsSymlink classify the entry by its mode.
func (e *TreeEntry) IsDir() bool     { return e.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (e *TreeEntry) IsRegular() bool { return e.Mode&syscall.S_IFMT == syscall.S_IFREG }
func (e *TreeEntry) IsSymlink() bool { return e.Mode&syscall.S_IFMT == syscall.S_IFLNK }

// Tree is one directory: its entries sorted by name, names unique.
type Tree struct {
	Entries []TreeEntry
}

// Limits on decoded trees, so that bad bytes cannot ask for huge
// allocations.
const (
	maxNameLen   = 255     // NAME_MAX
	maxTargetLen = 4096    // PATH_MAX
	maxXattrs    = 1 << 16 // per node
	maxXattrName = 255     // XATTR_NAME_MAX
	maxXattrVal  = 1 << 16 // XATTR_SIZE_MAX
	treeVersion  = 1
)

// ErrBadName is matched by errors.Is for a name that cannot be a
// directory entry or a snapshot: empty, ".", "..", containing "/" or NUL,
// or longer than 255 bytes.
var ErrBadName = errors.New("invalid name")

// CheckName returns an error wrapping ErrBadName unless name can be a
// directory entry (and so a snapshot name).
func CheckName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("%w: %q", ErrBadName, name)
	case len(name) > maxNameLen:
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrBadName, len(name), maxNameLen)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("%w: %q contains '/' or NUL", ErrBadName, name)
	}
	return nil
}

// CheckSnapshotName returns an error wrapping ErrBadName unless name
// can be a new snapshot's: CheckName's rules, and no control character
// (a byte below 0x20, or 0x7f), which would break the lines and columns
// of a listing. A directory entry may hold them, and a snapshot an older
// build named with one still reads: only new names are checked.
func CheckSnapshotName(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if i := strings.IndexFunc(name, isControl); i >= 0 {
		return fmt.Errorf("%w: %q contains a control character (0x%02x)", ErrBadName, name, name[i])
	}
	return nil
}

// isControl reports whether r is an ASCII control character.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Sort orders t's entries by name.
func (t *Tree) Sort() {
	slices.SortFunc(t.Entries, func(a, b TreeEntry) int { return strings.Compare(a.Name, b.Name) })
}

// Lookup finds the entry called name.
func (t *Tree) Lookup(name string) (TreeEntry, bool) {
	i, ok := slices.BinarySearchFunc(t.Entries, name, func(e TreeEntry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return TreeEntry{}, false
	}
	return t.Entries[i], true
}

// MarshalBinary encodes t (sorted by name; see Sort).
func (t *Tree) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 64*len(t.Entries)+8)
	b = append(b, treeVersion)
	b = binary.AppendUvarint(b, uint64(len(t.Entries)))
	for i := range t.Entries {
		if i > 0 && t.Entries[i-1].Name >= t.Entries[i].Name {
			return nil, fmt.Errorf("tree entries not sorted and unique at %q", t.Entries[i].Name)
		}
		b = appendEntry(b, &t.Entries[i])
	}
	return b, nil
}

// Encode returns t's encoding and hash.
func (t *Tree) Encode() ([]byte, TreeHash, error) {
	b, err := t.MarshalBinary()
	if err != nil {
		return nil, TreeHash{}, err
	}
	return b, sha256.Sum256(b), nil
}

func appendEntry(b []byte, e *TreeEntry) []byte {
	b = binary.AppendUvarint(b, uint64(len(e.Name)))
	b = append(b, e.Name...)
	for _, v := range []uint64{uint64(e.Mode), uint64(e.UID), uint64(e.GID), uint64(e.Nlink), e.Ino, e.Rdev, e.Size} {
		b = binary.AppendUvarint(b, v)
	}
	for _, v := range []int64{e.Atime, e.Mtime, e.Ctime} {
		b = binary.AppendVarint(b, v)
	}
	switch {
	case e.IsRegular():
		b = binary.AppendUvarint(b, uint64(e.Rev.File))
		b = binary.AppendUvarint(b, uint64(e.Rev.Rev))
	case e.IsDir():
		b = append(b, e.Tree[:]...)
	case e.IsSymlink():
		b = binary.AppendUvarint(b, uint64(len(e.Target)))
		b = append(b, e.Target...)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Xattrs)))
	for _, x := range e.Xattrs {
		b = binary.AppendUvarint(b, uint64(len(x.Name)))
		b = append(b, x.Name...)
		b = binary.AppendUvarint(b, uint64(len(x.Value)))
		b = append(b, x.Value...)
	}
	return b
}

// UnmarshalBinary decodes what MarshalBinary wrote; malformed input gives
// an error wrapping ErrDecode.
func (t *Tree) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != treeVersion {
		return fmt.Errorf("%w: tree version %d", ErrDecode, v)
	}
	// Every entry takes at least 12 bytes, which bounds the count.
	n := d.uvarint(uint64(len(b)) / 12)
	ents := make([]TreeEntry, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		e := decodeEntry(&d)
		if d.err == nil && i > 0 && ents[i-1].Name >= e.Name {
			d.fail("tree entries out of order")
		}
		ents = append(ents, e)
	}
	if err := d.finish(); err != nil {
		return fmt.Errorf("tree: %w", err)
	}
	t.Entries = ents
	return nil
}

func decodeEntry(d *decoder) TreeEntry {
	var e TreeEntry
	e.Name = string(d.bytes(maxNameLen))
	if d.err == nil && CheckName(e.Name) != nil {
		d.fail("bad entry name")
	}
	e.Mode = uint32(d.uvarint(1<<32 - 1))
	e.UID = uint32(d.uvarint(1<<32 - 1))
	e.GID = uint32(d.uvarint(1<<32 - 1))
	e.Nlink = uint32(d.uvarint(1<<32 - 1))
	e.Ino, e.Rdev, e.Size = d.uvarint(1<<64-1), d.uvarint(1<<64-1), d.uvarint(1<<63-1)
	e.Atime, e.Mtime, e.Ctime = d.varint(), d.varint(), d.varint()
	switch {
	case e.IsRegular():
		e.Rev.File = FileID(d.uvarint(1<<64 - 1))
		e.Rev.Rev = Rev(d.uvarint(1<<32 - 1))
	case e.IsDir():
		copy(e.Tree[:], d.fixed(len(e.Tree)))
	case e.IsSymlink():
		e.Target = string(d.bytes(maxTargetLen))
	}
	nx := d.uvarint(maxXattrs)
	for i := uint64(0); i < nx && d.err == nil; i++ {
		name := string(d.bytes(maxXattrName))
		val := bytes.Clone(d.bytes(maxXattrVal))
		e.Xattrs = append(e.Xattrs, Xattr{Name: name, Value: val})
	}
	return e
}

// fixed reads n raw bytes.
func (d *decoder) fixed(n int) []byte {
	if len(d.b) < n {
		d.fail("short value")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
