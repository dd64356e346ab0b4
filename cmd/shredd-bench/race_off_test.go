//go:build !race

package main

// raceEnabled reports whether this test binary was built with -race; the
// server binary the end-to-end tests start is then built with -race too.
const raceEnabled = false
