package client_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/shredd/shredd/api/client/verify"
)

// readEvidence reads a file of the shared evidence corpus: here, the
// operator's keys and the evidence an auditor was handed.
func readEvidence(name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "evidence", "files", name))
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// Example_verify checks an export and a bare attestation offline with
// package verify, the strict reader of `shredd verify`.
func Example_verify() {
	// The operator's keys, obtained out of band, as the files' bytes.
	attestationPub, logVKey := readEvidence("key.pem"), readEvidence("log.vkey")
	salt, err := hex.DecodeString("b65bf8931e66e8fab35e4771266c5b77294808e45535ae579eda977a4065545f")
	if err != nil {
		log.Fatal(err)
	}
	rep, err := verify.Export(readEvidence("001-valid.tar.gz"), attestationPub, logVKey, verify.Options{
		Subject: "alice@example.com", Salt: salt, // both or neither
		Saved: readEvidence("saved.checkpoint"), // optional: the log must extend it
	})
	fmt.Println(verify.Reason(err), rep.Forget)

	// Witness key files, and how many must have cosigned (0: all of them).
	_, err = verify.Export(readEvidence("001-valid.tar.gz"), attestationPub, logVKey, verify.Options{
		WitnessKeys: [][]byte{readEvidence("witness-1.vkey")}, WitnessesRequired: 1,
	})
	fmt.Println(verify.Reason(err))

	// A bare attestation; a subject without its salt is the program's own error.
	_, err = verify.Attestation(readEvidence("272-bare-valid.dsse.json"), attestationPub, "alice@example.com", salt)
	fmt.Println(verify.Reason(err))
	_, err = verify.Attestation(readEvidence("272-bare-valid.dsse.json"), attestationPub, "alice@example.com", nil)
	fmt.Println(verify.Reason(err), errors.Is(err, verify.ErrUsage))
	// Output:
	// ok 3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c
	// checkpoint.witnesses
	// ok
	// usage true
}
