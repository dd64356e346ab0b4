package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/envelope"
)

// dataKeyOf checks a data key answer (a reply's body or a batch result)
// and returns its data key; the header must parse, carry the answered
// artifact and have lineage subjects.
func dataKeyOf(t *testing.T, res map[string]any, lineage int) (string, envelope.DataKey) {
	t.Helper()
	if len(res) != 4 {
		t.Fatalf("a data key answer has artifact, header, key and lineage_size, no more: %v", res)
	}
	art, _ := res["artifact"].(string)
	hdr, err := base64.StdEncoding.Strict().DecodeString(res["header"].(string))
	if err != nil {
		t.Fatalf("header: %v", err)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(res["key"].(string))
	if err != nil || len(key) != envelope.KeySize {
		t.Fatalf("key: %d bytes, %v", len(key), err)
	}
	h, err := envelope.ParseHeader(hdr)
	if err != nil {
		t.Fatalf("ParseHeader: %v", err)
	}
	if hex.EncodeToString(h.Artifact[:]) != art || len(h.Lineage) != lineage || res["lineage_size"] != float64(lineage) {
		t.Fatalf("header of artifact %x with %d subjects; answered %s, lineage_size %v, want %d", h.Artifact, len(h.Lineage), art, res["lineage_size"], lineage)
	}
	return art, envelope.DataKey{Header: hdr, Key: key}
}

// sealText seals plaintext with dk on the client side and returns the
// text form.
func sealText(t *testing.T, dk envelope.DataKey, plaintext, context string) string {
	t.Helper()
	b, err := envelope.SealWithKey(nil, dk, []byte(plaintext), []byte(context))
	if err != nil {
		t.Fatal(err)
	}
	return envelope.Prefix + base64.RawURLEncoding.EncodeToString(b)
}

// TestDataKey: POST /v1/datakey registers the artifact and answers a key
// that is never cached; the envelope the client seals with it opens
// through POST /v1/decrypt with its context, derivatives inherit the
// parents' lineage, and the key reaches neither the log nor another route.
func TestDataKey(t *testing.T) {
	e := newEnv(t, 0)
	parent, _ := e.setup()

	r := e.do("POST", "/v1/datakey", `{"subject":"erin@example.com","kind":"episodic"}`)
	if r.status != 200 || r.ctype != "application/json" {
		t.Fatalf("datakey: %d %s %v", r.status, r.ctype, r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q, want no-store", cc)
	}
	art, dk := dataKeyOf(t, r.body, 1)
	ct := sealText(t, dk, "Erin walks to work.", "tenant=acme")
	d := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+ct+`","context":"`+b64("tenant=acme")+`"}`)
	if d.status != 200 || str(d, "plaintext") != b64("Erin walks to work.") || str(d, "artifact") != art || str(d, "kind") != "episodic" {
		t.Fatalf("decrypt of the client-sealed envelope: %d %v", d.status, d.body)
	}
	if d := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+ct+`"}`); d.status != 422 || str(d, "code") != "invalid_envelope" {
		t.Fatalf("decrypt without the context: %d %v, want 422 invalid_envelope", d.status, d.body)
	}
	if a := e.do("GET", "/v1/artifacts/"+art, ""); a.status != 200 || a.body["sealed"] != true || a.body["kind"] != "episodic" {
		t.Fatalf("the artifact is not registered as sealed: %d %v", a.status, a.body)
	}
	if strings.Contains(e.log.String(), str(r, "key")) || strings.Contains(e.log.String(), "erin") {
		t.Fatalf("the log holds the key or the subject id:\n%s", e.log.String())
	}

	// A derivative: its lineage is its subject's and its parent's. The
	// token read erin's artifact above and declares this write independent
	// of that read.
	r = e.do("POST", "/v1/datakey", `{"subjects":["bob@example.com"],"parents":["`+parent+`"],"kind":"episodic","independent":true}`)
	if r.status != 200 {
		t.Fatalf("datakey of a derivative: %d %v", r.status, r.body)
	}
	_, dk = dataKeyOf(t, r.body, 2)
	ct = sealText(t, dk, "Both drink tea.", "")
	if d := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+ct+`"}`); d.status != 200 || str(d, "plaintext") != b64("Both drink tea.") {
		t.Fatalf("decrypt of the derivative: %d %v", d.status, d.body)
	}
	// Forgetting the parent's subject erases the client-sealed derivative,
	// and no new data key names the forgotten parent.
	if f := e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`); f.status != 202 {
		t.Fatalf("forget: %d %v", f.status, f.body)
	}
	if d := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+ct+`"}`); d.status != 410 || str(d, "code") != "shredded" {
		t.Fatalf("decrypt after the parent's forget: %d %v, want 410 shredded", d.status, d.body)
	}
	if r := e.do("POST", "/v1/datakey", `{"parents":["`+parent+`"],"kind":"episodic","independent":true}`); r.status != 410 || str(r, "code") != "shredded" {
		t.Fatalf("datakey of a forgotten parent: %d %v, want 410 shredded", r.status, r.body)
	}
}

// TestDataKeyRefused: the errors of encrypt, and the fields of encrypt
// that stay on the client are unknown here.
func TestDataKeyRefused(t *testing.T) {
	e := newEnv(t, 0)
	e.setup()
	if f := e.do("POST", "/v1/forget", `{"subject":"gone@example.com"}`); f.status != 202 {
		t.Fatalf("forget: %d %v", f.status, f.body)
	}
	_, dec, err := e.tokens.Create(context.Background(), "reader", []string{access.ScopeDecrypt}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, body string
		hdr        []string
		status     int
		code       string
	}{
		{"decrypt-only token", `{"subject":"x@example.com","kind":"episodic"}`, []string{"Authorization", "Bearer " + dec}, 403, "forbidden"},
		{"no token", `{"subject":"x@example.com","kind":"episodic"}`, []string{"Authorization", ""}, 401, "unauthenticated"},
		{"forgotten subject", `{"subject":"gone@example.com","kind":"episodic"}`, nil, 410, "shredded"},
		{"unknown kind", `{"subject":"x@example.com","kind":"notes"}`, nil, 400, "unknown_kind"},
		{"no kind", `{"subject":"x@example.com"}`, nil, 400, "missing_field"},
		{"unknown parent", `{"parents":["00000000000000000000000000000000"],"kind":"episodic"}`, nil, 400, "unknown_parent"},
		{"no subject or parent", `{"kind":"episodic"}`, nil, 400, "invalid_request"},
		{"unknown field", `{"subject":"x@example.com","kind":"episodic","color":"red"}`, nil, 400, "invalid_json"},
		{"plaintext", `{"subject":"x@example.com","kind":"episodic","plaintext":"` + b64("tea") + `"}`, nil, 400, "invalid_json"},
		{"context", `{"subject":"x@example.com","kind":"episodic","context":"` + b64("c") + `"}`, nil, 400, "invalid_json"},
		{"plaintext in a batch item", batch(`{"subject":"x@example.com","kind":"episodic"}`, `{"subject":"y@example.com","kind":"episodic","plaintext":""}`), nil, 400, "invalid_json"},
		{"empty batch", `{"batch_input":[]}`, nil, 400, "invalid_request"},
		{"not JSON", `{"subject":`, nil, 400, "invalid_json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/v1/datakey", c.body, c.hdr...)
			if r.status != c.status || str(r, "code") != c.code || r.ctype != "application/problem+json" {
				t.Fatalf("%d %s %v, want %d %s", r.status, r.ctype, r.body, c.status, c.code)
			}
			if _, ok := r.body["key"]; ok {
				t.Fatalf("a refusal carries a key: %v", r.body)
			}
		})
	}
	// Nothing was registered for the refused requests: x@example.com has
	// no artifact to forget.
	if p := e.do("POST", "/v1/forget", `{"subject":"x@example.com","dry_run":true}`); p.status != 200 {
		t.Fatalf("dry run: %d %v", p.status, p.body)
	} else if n, _ := p.body["counts"].(map[string]any)["total"].(float64); n != 0 {
		t.Fatalf("refused data key requests registered %v artifacts", n)
	}
}

// TestDataKeyBatch: one result per item, in order; a failed item holds
// only its error and the others are registered and seal.
func TestDataKeyBatch(t *testing.T) {
	e := newEnv(t, 0)
	e.setup()
	if f := e.do("POST", "/v1/forget", `{"subject":"gone@example.com"}`); f.status != 202 {
		t.Fatalf("forget: %d %v", f.status, f.body)
	}
	r := e.do("POST", "/v1/datakey", batch(
		`{"subject":"carol@example.com","kind":"episodic"}`,
		`{"subject":"dave@example.com","kind":"notes"}`,
		`{"subject":"gone@example.com","kind":"episodic"}`,
		`{"subjects":["carol@example.com","dave@example.com"],"kind":"episodic","holder":"writer-1"}`,
	))
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q, want no-store", cc)
	}
	res := results(t, r)
	checkCodes(t, res, "", "unknown_kind", "shredded", "")
	keys := map[string]bool{}
	for i, n := range map[int]int{0: 1, 3: 2} {
		art, dk := dataKeyOf(t, res[i], n)
		keys[string(dk.Key)] = true
		ct := sealText(t, dk, "item", "")
		if d := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+ct+`"}`); d.status != 200 || str(d, "plaintext") != b64("item") || str(d, "artifact") != art {
			t.Fatalf("item %d: decrypt: %d %v", i, d.status, d.body)
		}
	}
	if len(keys) != 2 {
		t.Fatalf("two items got the same key")
	}
	if e := itemErr(res[2]); e["status"] != 410.0 || e["title"] != "A subject of this data was forgotten: the data is cryptographically erased" {
		t.Fatalf("shredded item: %v", e)
	}
	// The client-sealed envelope of a key that does not match its header
	// does not open: a key opens its own artifact only.
	_, dk0 := dataKeyOf(t, res[0], 1)
	_, dk3 := dataKeyOf(t, res[3], 2)
	mixed := sealText(t, envelope.DataKey{Header: dk0.Header, Key: dk3.Key}, "item", "")
	if d := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+mixed+`"}`); d.status != 422 || str(d, "code") != "invalid_envelope" {
		t.Fatalf("an envelope sealed with another artifact's key: %d %v, want 422", d.status, d.body)
	}
	if bytes.Equal(dk0.Header, dk3.Header) {
		t.Fatalf("two items got the same header")
	}
}
