package translog_test

import (
	"fmt"
	"os"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/translog"
)

// CheckProof is what `shredd verify` runs offline: the entry, its
// tlog-proof and the log's public note key are all it needs.
func ExampleCheckProof() {
	entry, _ := os.ReadFile("testdata/entry3-of-10.entry")
	proof, _ := os.ReadFile("testdata/entry3-of-10.tlog-proof")
	v, err := note.NewVerifier("example.com/shredd-test-log+a94ece45+ARF7XcFa2ufqxqDVp3cezLoC38KX3wr8pnn8HnShXM9V")
	if err != nil {
		panic(err)
	}
	c, err := translog.CheckProof(proof, entry, v)
	if err != nil {
		panic(err)
	}
	fmt.Printf("entry 3 is in tree %d of %s\n", c.Size, c.Origin)
	_, err = translog.CheckProof(proof, []byte("another entry"), v)
	fmt.Println(err != nil)
	// Output:
	// entry 3 is in tree 10 of example.com/shredd-test-log
	// true
}

func ExampleParseCheckpoint() {
	c, err := translog.ParseCheckpoint([]byte("example.com/log\n2\nfvvO9r1bJJNuzRnwxVNjhvmJR0ybWyCHYPrWJqx8VHw=\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Origin, c.Size, c.Hash)
	// Output: example.com/log 2 fvvO9r1bJJNuzRnwxVNjhvmJR0ybWyCHYPrWJqx8VHw=
}
