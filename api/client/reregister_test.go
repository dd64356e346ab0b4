package client_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestReregister checks the client's side of the restore repair against a
// real server: a ciphertext whose registration is gone (the rows deleted
// from the real SQLite file, as a restore of an older backup leaves them)
// gives IsUnknownArtifact, Reregister answers registered then known (and a
// tampered envelope as an item error), and the ciphertext opens again.
func TestReregister(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{AdminToken: adminToken, Kinds: []string{"episodic"}})
	srv := httptest.NewServer(api.New(api.Config{Service: st.Service, Evidence: st.Evidence, Root: stackRoot(st), Tokens: st.Tokens}).Handler())
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice"}, Kind: "episodic", Plaintext: []byte("tea"), Context: []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Registry.Fold(ctx); err != nil { // the registration WAL folds in the background
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM artifacts`, `DELETE FROM lineage`, `DELETE FROM lineage_staged`} {
		if _, err := st.DB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Decrypt(ctx, client.DecryptRequest{Ciphertext: sealed.Ciphertext, Context: []byte("c")})
	if !client.IsUnknownArtifact(err) || client.IsInvalidEnvelope(err) {
		t.Fatalf("decrypt of an unregistered artifact: %v, want 409 unknown_artifact", err)
	}
	tampered := []byte(sealed.Ciphertext)
	tampered[len(tampered)-2] = map[bool]byte{true: 'B', false: 'A'}[tampered[len(tampered)-2] == 'A'] // in the tag
	for round, want := range []string{"registered", "known"} {
		res, err := c.Reregister(ctx, []client.ReregisterRequest{{Ciphertext: sealed.Ciphertext, Context: []byte("c")}, {Ciphertext: string(tampered), Context: []byte("c")}})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil || res[0].Status != want || res[0].Artifact != sealed.Artifact || res[0].Kind != "episodic" || res[0].LineageSize != 1 {
			t.Fatalf("round %d: %+v (%v), want %s", round, res[0], res[0].Err, want)
		}
		if !client.IsInvalidEnvelope(res[1].Err) {
			t.Fatalf("round %d: tampered envelope: %+v", round, res[1])
		}
	}
	if got, err := c.Decrypt(ctx, client.DecryptRequest{Ciphertext: sealed.Ciphertext, Context: []byte("c")}); err != nil || string(got.Plaintext) != "tea" {
		t.Fatalf("decrypt after reregister: %v", err)
	}
}
