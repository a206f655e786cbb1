package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is one markdown table of a report.
type Table struct {
	Title  string
	Doc    string // a paragraph under the title
	Header []string
	Rows   [][]string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Markdown writes t as a GitHub-flavoured markdown table with padded
// columns, so that it reads well as plain text too.
func (t Table) Markdown(w io.Writer) {
	if t.Title != "" {
		fmt.Fprintf(w, "### %s\n\n", t.Title)
	}
	if t.Doc != "" {
		fmt.Fprintf(w, "%s\n\n", t.Doc)
	}
	width := make([]int, len(t.Header))
	for i, h := range t.Header {
		width[i] = max(3, utf8.RuneCountInString(h))
	}
	for _, r := range t.Rows {
		for i := range min(len(r), len(width)) {
			width[i] = max(width[i], utf8.RuneCountInString(r[i]))
		}
	}
	row := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i == 0 || !numeric(c) {
				b.WriteString(" " + c + pad + " |")
			} else {
				b.WriteString(" " + pad + c + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	row(t.Header)
	sep := make([]string, len(width))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	row(sep)
	for _, r := range t.Rows {
		row(r)
	}
	fmt.Fprintln(w)
}

// numeric reports whether a cell is a figure, to right-align it.
func numeric(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return c >= '0' && c <= '9' || c == '-' && len(s) > 1 || c == '~'
}
