package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/shredd/shredd/api/client"
)

// Example_unit is what a read costs a writer (docs/clients.md, "What a
// read costs a writer"): a summarizer reads a subject's records and writes
// a profile from them in a unit of work, which names its reads on its
// write, so that forgetting the subject it read makes the profile
// unreadable. A write outside the unit answers for the same reads until
// their leases expire, released or not.
func Example_unit() {
	base, token, _ := exampleServer()
	ctx := context.Background()
	c, err := client.New(base, token)
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"episodic", "summary"} {
		if _, _, err := c.PutKind(ctx, k, ""); err != nil {
			log.Fatal(err)
		}
	}
	var rows []string
	for _, m := range []string{"Alice prefers green tea.", "Alice lives in Lisbon."} {
		r, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic",
			Plaintext: []byte(m)})
		if err != nil {
			log.Fatal(err)
		}
		rows = append(rows, r.Ciphertext)
	}

	profile, err := summarize(ctx, c, rows, "bob@example.com")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("profile lineage:", profile.LineageSize) // bob, and alice from the reads

	// Outside any unit, a write answers for every read of its token until
	// the leases expire, released or not, the units' reads included: this
	// note, which Bob told us and which holds nothing of alice's rows, is
	// refused.
	note := client.EncryptRequest{Subjects: []string{"bob@example.com"}, Kind: "episodic",
		Plaintext: []byte("Bob moved to Porto.")}
	_, err = c.Encrypt(ctx, note)
	if e, ok := client.AsError(err); ok && client.IsUndeclaredDerivation(err) {
		fmt.Println("refused:", e.Code, len(e.Leases), "reads")
	}
	// Never answer the refusal by copying e.Leases into IndependentOf: that
	// would launder whatever the reads fed into the data. Data made from
	// reads names them (Leases, or the reads' unit); work that read nothing
	// of them, as this note, runs in a unit of its own, which answers for
	// its own reads only.
	ingest := c.Unit()
	_, err = ingest.Encrypt(ctx, note)
	if err = errors.Join(err, ingest.Close(ctx)); err != nil {
		log.Fatal(err)
	}

	if _, err := c.Forget(ctx, "alice@example.com"); err != nil {
		log.Fatal(err)
	}
	_, err = c.Decrypt(ctx, client.DecryptRequest{Ciphertext: profile.Ciphertext})
	fmt.Println("profile after alice's forget is shredded:", client.IsShredded(err))
	// Output:
	// profile lineage: 2
	// refused: undeclared_derivation 2 reads
	// profile after alice's forget is shredded: true
}

// summarize reads rows in a unit of work and seals a profile of subject
// from them: the unit names its reads on the write, and Close releases
// their leases (its error joined to the caller's own, never in its place).
func summarize(ctx context.Context, c *client.Client, rows []string, subject string) (profile client.EncryptResponse, err error) {
	u := c.Unit()
	defer func() { err = errors.Join(err, u.Close(ctx)) }()
	var text []byte
	for _, ct := range rows {
		d, err := u.Decrypt(ctx, client.DecryptRequest{Ciphertext: ct, Holder: "summarizer-1"})
		if err != nil {
			return profile, err
		}
		text = append(text, d.Plaintext...)
		clear(d.Plaintext)
	}
	defer clear(text)
	return u.Encrypt(ctx, client.EncryptRequest{Subjects: []string{subject}, Kind: "summary", Plaintext: text})
}
