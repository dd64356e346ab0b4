package attest_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/shredd/shredd/attest"
)

// Example checks an attestation file offline, as `shredd verify` does:
// the service's public key, then the subject id and salt the caller of
// forget kept.
func Example() {
	pub, err := attest.ParsePublicKey(must(os.ReadFile("testdata/attestation.pub")))
	if err != nil {
		panic(err)
	}
	st, err := attest.Open(must(os.ReadFile("testdata/vault.dsse.json")), pub)
	if err != nil {
		panic(err)
	}
	salt, _ := attest.ParseSalt("0bb4d8374d7971cab11d6ac8a2ca8aed25c71e4bf8b888b8c834a49df951857d")
	fmt.Println(st.Predicate.Claim, "at", st.Predicate.Timeline.Erased.Format("2006-01-02 15:04:05"))
	fmt.Println(st.CheckSubject("alice@example.com", salt))
	fmt.Println(errors.Is(st.CheckSubject("bob@example.com", salt), attest.ErrCommitment))
	// Output:
	// cryptographically erased at 2026-03-01 10:06:30
	// <nil>
	// true
}

// ExampleCommit commits to a subject id. In production the salt comes from
// NewSalt and goes back to the caller of forget only.
func ExampleCommit() {
	salt := make([]byte, attest.SaltSize) // fixed for the example
	c := attest.Commit("alice@example.com", salt)
	fmt.Println(c)
	fmt.Println(attest.CheckCommitment("alice@example.com", salt, c), attest.CheckCommitment("alice@example.org", salt, c))
	// Output:
	// 9877a82fe8a6051986139039ed626da59cdb0539baaa8322353c872b831bf90c
	// true false
}

// ExampleSign signs a statement and reads it back; a pending condition is
// never signed.
func ExampleSign() {
	seed := sha256.Sum256([]byte("example key: public, never use it")) // fixed for the example
	key := ed25519.NewKeyFromSeed(seed[:])
	fmt.Println("key id", attest.KeyID(key.Public().(ed25519.PublicKey))[:16])

	st := exampleStatement()
	st.Predicate.Conditions[1].Status = attest.StatusPending
	_, err := attest.Sign(st, key)
	fmt.Println(errors.Is(err, attest.ErrCondition))

	st = exampleStatement()
	env, err := attest.Sign(st, key)
	if err != nil {
		panic(err)
	}
	file, _ := json.Marshal(env)
	got, err := attest.Open(file, key.Public().(ed25519.PublicKey))
	fmt.Println(got.Predicate.Forget, err)
	// Output:
	// key id 6e2ef98970bc2c1b
	// true
	// 8c1f0e6a2b4d4e97a1c3f5e7092b4d6f <nil>
}

func exampleStatement() attest.Statement {
	pub, _ := attest.ParsePublicKey(must(os.ReadFile("testdata/attestation.pub")))
	st, err := attest.Open(must(os.ReadFile("testdata/vault.dsse.json")), pub)
	if err != nil {
		panic(err)
	}
	return *st
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
