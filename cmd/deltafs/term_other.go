//go:build !linux

package main

import "os"

// isTerminal reports whether f is a character device, the closest
// portable guess at a terminal.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
