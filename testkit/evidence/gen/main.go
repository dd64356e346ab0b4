// Command gen writes the shared corpus of evidence cases to
// testdata/evidence (run from the repository root):
//
//	go run ./testkit/evidence/gen
//
// The corpus is append-only: add cases at the end of evidence.Cases,
// never change a published one.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/shredd/shredd/testkit/evidence"
)

func main() {
	dir := flag.String("dir", "testdata/evidence", "where to write the corpus")
	flag.Parse()
	if err := evidence.Write(*dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
