package index

import "fmt"

// FileID identifies one versioned file of the store. Ids start at 1; 0 is
// never allocated so that the zero RevID can mean "no revision".
type FileID uint64

// Rev is a per-file revision number, counted from 0.
type Rev uint32

// RevID names one revision of one file. The zero value is the null RevID.
type RevID struct {
	File FileID
	Rev  Rev
}

// NullRev is the null RevID: no parent, no base.
var NullRev = RevID{}

// IsNull reports whether id names no revision.
func (id RevID) IsNull() bool { return id.File == 0 }

// String formats id as "rev@file", or "null".
func (id RevID) String() string {
	if id.IsNull() {
		return "null"
	}
	return fmt.Sprintf("%d@%d", id.Rev, id.File)
}
