package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/shredd/shredd/api/client"
)

// Example_sealMany seals on the client (docs/clients.md, "Seal on the
// client"): one item sealed, one refused alone.
func Example_sealMany() {
	base, token, _ := exampleServer()
	ctx := context.Background()
	c, err := client.New(base, token)
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.PutKind(ctx, "episodic", ""); err != nil {
		log.Fatal(err)
	}
	res, err := c.SealMany(ctx, []client.EncryptRequest{
		{Subjects: []string{"gina@example.com"}, Kind: "episodic", Plaintext: []byte("Gina takes the night train."),
			Context: []byte("tenant=acme")},
		{Subjects: []string{"gina@example.com"}, Kind: "no-such-kind", Plaintext: []byte("lost")},
	})
	if err != nil {
		log.Fatal(err) // the call as a whole: 401, 403, 413, a transport error, a plaintext over 64 MiB
	}
	for i, r := range res {
		if r.Err != nil { // this item only: it was not registered
			fmt.Println(i, r.Err.Code)
			continue
		}
		opened, err := c.Decrypt(ctx, client.DecryptRequest{Ciphertext: r.Ciphertext(), Context: []byte("tenant=acme")})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(i, opened.Artifact == r.Artifact, string(opened.Plaintext))
	}
	// Output:
	// 0 true Gina takes the night train.
	// 1 unknown_kind
}
