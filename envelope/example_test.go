package envelope_test

import (
	"errors"
	"fmt"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/testkeys"
)

// Example seals a summary derived from two subjects, sends it on as text,
// and opens it: with both keys it opens, with one missing or the wrong
// context it does not.
func Example() {
	keys := []envelope.SubjectKey{testkeys.Key(0), testkeys.Key(1)} // from the keystore
	lineage := []envelope.Ref{keys[0].Ref, keys[1].Ref}

	// In production pass nil (crypto/rand); the fixed stream keeps the
	// example reproducible.
	h, err := envelope.NewHeader(testkeys.Rand("example"), testkeys.Artifact(0), "summary", lineage)
	if err != nil {
		panic(err)
	}
	e, err := envelope.Seal(h, keys, []byte("Both users prefer tea."), []byte("tenant=acme"))
	if err != nil {
		panic(err)
	}
	text := e.String()

	p, err := envelope.ParseText(text)
	if err != nil {
		panic(err)
	}
	pt, err := envelope.Open(p, keys, []byte("tenant=acme"))
	fmt.Printf("%s %v\n", pt, err)

	_, err = envelope.Open(p, keys[:1], []byte("tenant=acme")) // a subject was forgotten
	fmt.Println(errors.Is(err, envelope.ErrInvalid))

	_, err = envelope.Open(p, keys, []byte("tenant=other"))
	fmt.Println(err)
	// Output:
	// Both users prefer tea. <nil>
	// true
	// envelope: open: message authentication failed
}
