package api_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
)

// nonCanonical returns the standard base64 s with its padding bits set: the
// lenient decoder reads it as the same bytes.
func nonCanonical(t *testing.T, s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := len(strings.TrimRight(s, "=")) - 1
	if i == len(s)-1 {
		t.Fatalf("%q has no padding bits", s)
	}
	out := s[:i] + string(alphabet[strings.IndexByte(alphabet, s[i])|1]) + s[i+1:]
	if b, err := base64.StdEncoding.DecodeString(out); err != nil || base64.StdEncoding.EncodeToString(b) != s {
		t.Fatalf("%q is not another spelling of %q", out, s)
	}
	return out
}

// TestCanonicalBase64 sends each base64 field outside the JSON bodies of
// TestLimits (holder keys, ack signatures, the Shredd-Context header) in
// spellings the lenient decoder accepts: set padding bits, line breaks.
// Each answers 400 invalid_base64 naming the field.
func TestCanonicalBase64(t *testing.T) {
	e := newEnv(t, 0)
	e.setup()
	pub, _, _ := ed25519.GenerateKey(nil)
	pk := base64.StdEncoding.EncodeToString(pub)
	sig := base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
	const fid, art = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	ack := func(sig string) string {
		return `{"holder":"ann-1","artifacts":["` + art + `"],"signature":"` + sig + `"}`
	}
	raw := func(ctx string) []string {
		return []string{"Content-Type", "application/octet-stream", "Shredd-Kind", "episodic", "Shredd-Subject", "a", "Shredd-Context", ctx}
	}
	cases := []struct {
		name, path, body string
		hdr              []string
		field            string
	}{
		{"public key with padding bits", "/v1/holders", `{"holder":"ann-1","public_key":"` + nonCanonical(t, pk) + `"}`, nil, "public_key"},
		{"public key with a LF", "/v1/holders", `{"holder":"ann-1","public_key":"` + pk + `\n"}`, nil, "public_key"},
		{"public key folded", "/v1/holders", `{"holder":"ann-1","public_key":"` + pk[:20] + `\r\n` + pk[20:] + `"}`, nil, "public_key"},
		{"signature with padding bits", "/v1/forgets/" + fid + "/acks", ack(nonCanonical(t, sig)), nil, "signature"},
		{"signature with a LF", "/v1/forgets/" + fid + "/acks", ack(sig + `\n`), nil, "signature"},
		{"Shredd-Context with padding bits", "/v1/encrypt/raw", "x", raw(nonCanonical(t, b64("ctx!"))), "Shredd-Context"},
		{"Shredd-Context unpadded", "/v1/encrypt/raw", "x", raw("YQ"), "Shredd-Context"},
		{"decrypt Shredd-Context with padding bits", "/v1/decrypt/raw", "x", []string{"Content-Type", "application/octet-stream", "Shredd-Context", "YR=="}, "Shredd-Context"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", c.path, c.body, c.hdr...)
			if r.status != 400 || str(r, "code") != "invalid_base64" || !strings.Contains(str(r, "detail"), c.field) {
				t.Fatalf("got %d %v, want 400 invalid_base64 naming %s", r.status, r.body, c.field)
			}
		})
	}
	// The canonical spellings pass the decoding.
	if r := e.do("POST", "/v1/holders", `{"holder":"ann-1","public_key":"`+pk+`"}`); r.status != 201 {
		t.Fatalf("canonical key: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/v1/encrypt/raw", "x", raw(b64("ctx!"))...); r.status != 200 {
		t.Fatalf("canonical Shredd-Context: %d %v", r.status, r.body)
	}
}
