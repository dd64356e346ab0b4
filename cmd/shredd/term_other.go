//go:build !linux

package main

import "os"

// isTerminal reports whether f is a character device: a terminal, or (a
// false yes that only makes a forget ask first) a device such as
// /dev/null. Linux uses the exact test (term_linux.go).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
