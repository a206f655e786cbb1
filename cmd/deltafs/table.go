package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// table writes a listing's rows (log, log --deleted, snapshot list):
// tab-separated with exact sizes for scripts, aligned under a header
// with human sizes for people (forPeople). Output is buffered: a
// history of 10,000 revisions is one write, not 10,000.
type table struct {
	bw     *bufio.Writer
	tw     *tabwriter.Writer // nil for scripts
	out    io.Writer
	people bool
}

// newTable starts a listing on w; header (tab-separated) is printed for
// people only.
func newTable(w io.Writer, people bool, header string) *table {
	t := &table{bw: bufio.NewWriterSize(w, 64<<10), people: people}
	t.out = t.bw
	if people {
		t.tw = tabwriter.NewWriter(t.bw, 0, 0, 2, ' ', 0)
		t.out = t.tw
		fmt.Fprintln(t.out, header)
	}
	return t
}

// row prints one row; its columns are separated by tabs in format.
func (t *table) row(format string, args ...any) { fmt.Fprintf(t.out, format, args...) }

// size is a size column: exact for scripts, human for people.
func (t *table) size(n uint64) string {
	if t.people {
		return humanSize(n)
	}
	return strconv.FormatUint(n, 10)
}

// flush writes what is buffered and returns the first write error.
func (t *table) flush() error {
	if t.tw != nil {
		if err := t.tw.Flush(); err != nil {
			return err
		}
	}
	return t.bw.Flush()
}
