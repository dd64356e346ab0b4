package api_test

import (
	"math"
	"testing"

	"github.com/shredd/shredd/envelope"
)

// TestUnknownGenerationIs422 decrypts envelopes forged to name subject key
// generations that never existed: 422 invalid_envelope, never 410 shredded
// (410 would claim an erasure that did not happen). The generation that a
// forget destroyed stays 410.
func TestUnknownGenerationIs422(t *testing.T) {
	e := newEnv(t, 0)
	e.setup()
	seal := func(subject string) *envelope.Envelope {
		r := e.do("POST", "/v1/encrypt", `{"subject":"`+subject+`","kind":"episodic","plaintext":"`+b64("tea")+`"}`)
		if r.status != 200 {
			t.Fatalf("encrypt: %d %v", r.status, r.body)
		}
		env, err := envelope.ParseText(str(r, "ciphertext"))
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	// forge is env with the generation of its one subject replaced (and
	// its subject, when sid is not zero).
	forge := func(env *envelope.Envelope, sid envelope.SID, gen uint32) *envelope.Envelope {
		h := env.Header
		ref := h.Lineage[0]
		if sid != (envelope.SID{}) {
			ref.SID = sid
		}
		ref.Gen = gen
		h.Lineage = []envelope.Ref{ref}
		return &envelope.Envelope{Header: h, Ciphertext: env.Ciphertext}
	}
	forget := func(subject string) {
		if r := e.do("POST", "/v1/forget", `{"subject":"`+subject+`"}`); r.status != 202 {
			t.Fatalf("forget: %d %v", r.status, r.body)
		}
	}
	live, gone := seal("live@example.com"), seal("gone@example.com")
	if g := live.Header.Lineage[0].Gen; g != 1 {
		t.Fatalf("a new subject's generation is %d, want 1", g)
	}
	forget("gone@example.com")
	// A subject forgotten before it had a key: a tombstone of generation 0.
	forget("never@example.com")
	never := e.hasher.SID("never@example.com")
	unseen := e.hasher.SID("unseen@example.com")

	cases := []struct {
		name   string
		env    *envelope.Envelope
		status int
		code   string
	}{
		{"live subject, its generation", live, 200, ""},
		{"live subject, next generation", forge(live, envelope.SID{}, 2), 422, "invalid_envelope"},
		{"live subject, generation 0", forge(live, envelope.SID{}, 0), 422, "invalid_envelope"},
		{"live subject, last generation", forge(live, envelope.SID{}, math.MaxUint32), 422, "invalid_envelope"},
		{"forgotten subject, the destroyed generation", gone, 410, "shredded"},
		{"forgotten subject, next generation", forge(gone, envelope.SID{}, 2), 422, "invalid_envelope"},
		{"forgotten subject, generation 0", forge(gone, envelope.SID{}, 0), 422, "invalid_envelope"},
		{"forgotten without a key, generation 0", forge(live, never, 0), 422, "invalid_envelope"},
		{"forgotten without a key, generation 1", forge(live, never, 1), 422, "invalid_envelope"},
		{"unknown subject", forge(live, unseen, 1), 422, "invalid_envelope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+c.env.String()+`"}`)
			if r.status != c.status || str(r, "code") != c.code {
				t.Fatalf("decrypt: %d %v, want %d %s", r.status, r.body, c.status, c.code)
			}
			r = e.do("POST", "/v1/decrypt/raw", string(c.env.Marshal()), "Content-Type", "application/octet-stream")
			if r.status != c.status || str(r, "code") != c.code {
				t.Fatalf("decrypt/raw: %d %v, want %d %s", r.status, r.body, c.status, c.code)
			}
			r = e.do("POST", "/v1/decrypt", batch(`{"ciphertext":"`+c.env.String()+`"}`))
			if c.code != "" {
				checkCodes(t, results(t, r), c.code)
			}
		})
	}
}
