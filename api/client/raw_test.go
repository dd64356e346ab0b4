package client_test

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/envelope"
)

// TestRaw seals and opens through the raw-body routes: a large binary
// payload, a derivative by parent, the error table (shredded, bad
// envelope, wrong context, missing kind, wrong content type) and the
// JSON routes reading what the raw ones wrote.
func TestRaw(t *testing.T) {
	s, c := serverWithKinds(t, "episodic", "summary")
	// The checks read with a token of their own that never writes; c's
	// reads are those its writes name (docs/api.md, "What a read costs a
	// writer").
	r := s.client(s.token(access.ScopeDecrypt))
	ctx := t.Context()
	pt := make([]byte, 3<<20+17)
	rand.Read(pt)
	out, err := c.EncryptRaw(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com", "bob, the second"}, Kind: "episodic",
		Plaintext: pt, Context: []byte("tenant=acme")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Artifact) != 32 || out.LineageSize != 2 {
		t.Fatalf("EncryptRaw: artifact %q, lineage %d", out.Artifact, out.LineageSize)
	}
	env, err := envelope.Parse(out.Envelope)
	if err != nil || env.Header.Kind != "episodic" || len(env.Header.Lineage) != 2 {
		t.Fatalf("the answer is not a binary envelope of the artifact: %v", err)
	}
	got, err := c.DecryptRaw(ctx, out.Envelope, []byte("tenant=acme"), "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Plaintext, pt) || got.Artifact != out.Artifact || got.Kind != "episodic" || len(got.LeaseID) != 32 || got.LeaseEnds.IsZero() {
		t.Fatalf("DecryptRaw: artifact %q kind %q lease %q until %v, plaintext equal: %v", got.Artifact, got.Kind, got.LeaseID, got.LeaseEnds,
			bytes.Equal(got.Plaintext, pt))
	}
	// A derivative by parent and by lease.
	der, err := c.EncryptRaw(ctx, client.EncryptRequest{Parents: []string{out.Artifact}, Leases: []string{got.LeaseID}, Subjects: []string{"carol@example.com"},
		Kind: "summary", Plaintext: []byte("summary")})
	if err != nil || der.LineageSize != 3 {
		t.Fatalf("EncryptRaw derivative: %+v, %v", der.LineageSize, err)
	}
	// The JSON decrypt opens the text form of a raw-sealed envelope.
	denv, err := envelope.Parse(der.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	js, err := r.Decrypt(ctx, client.DecryptRequest{Ciphertext: denv.String()})
	if err != nil || string(js.Plaintext) != "summary" || js.Artifact != der.Artifact {
		t.Fatalf("Decrypt of the text form: %v", err)
	}

	_, err = r.DecryptRaw(ctx, out.Envelope, []byte("other"), "")
	wantError(t, err, 422, "invalid_envelope")
	_, err = r.DecryptRaw(ctx, []byte("not an envelope"), nil, "")
	wantError(t, err, 422, "invalid_envelope")
	_, err = c.EncryptRaw(ctx, client.EncryptRequest{Subjects: []string{"a"}, Plaintext: []byte("x")})
	wantError(t, err, 400, "missing_field")
	// c still holds its read (got): the writes below say they are not
	// made from it (Shredd-Independent-Of).
	notFrom := []string{got.LeaseID}
	_, err = c.EncryptRaw(ctx, client.EncryptRequest{Subjects: []string{"a"}, Kind: "nokind", Plaintext: []byte("x"), IndependentOf: notFrom})
	wantError(t, err, 400, "unknown_kind")
	_, err = c.EncryptRaw(ctx, client.EncryptRequest{Parents: []string{"xyz"}, Kind: "summary"})
	wantError(t, err, 400, "invalid_id")

	if _, err := c.Forget(ctx, "bob, the second"); err != nil {
		t.Fatal(err)
	}
	_, err = r.DecryptRaw(ctx, out.Envelope, []byte("tenant=acme"), "")
	wantError(t, err, 410, "shredded")
	_, err = r.DecryptRaw(ctx, der.Envelope, nil, "")
	wantError(t, err, 410, "shredded")
	_, err = c.EncryptRaw(ctx, client.EncryptRequest{Subjects: []string{"bob, the second"}, Kind: "episodic", Plaintext: []byte("x"),
		IndependentOf: notFrom})
	wantError(t, err, 410, "shredded")

	// JSON is not a raw body; a raw body is not JSON.
	for _, path := range []string{"/v1/encrypt/raw", "/v1/decrypt/raw"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Shredd-Kind", "episodic")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s with JSON: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}
