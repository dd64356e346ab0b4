package api_test

import (
	"bytes"
	"strings"
	"testing"
)

// TestRawHeadersUTF8 sends header values that are not UTF-8 (net/http lets
// bytes from 0x80 up through) to the raw-body routes: 400 invalid_utf8
// naming the header, never echoing its value.
func TestRawHeadersUTF8(t *testing.T) {
	e := newEnv(t, 0)
	e.setup()
	octets := []string{"Content-Type", "application/octet-stream"}
	enc := func(hdr ...string) []string {
		return append(append([]string{"Shredd-Kind", "episodic", "Shredd-Subject", "alice"}, octets...), hdr...)
	}
	cases := []struct {
		name, path string
		hdr        []string
		status     int
		code       string
	}{
		{"UTF-8 subject", "/v1/encrypt/raw", enc("Shredd-Subject", "alice-é"), 200, ""},
		{"subject", "/v1/encrypt/raw", enc("Shredd-Subject", "alice\xff"), 400, "invalid_utf8"},
		{"subject: UTF-8 of a surrogate", "/v1/encrypt/raw", enc("Shredd-Subject", "alice\xed\xa0\x80"), 400, "invalid_utf8"},
		{"kind", "/v1/encrypt/raw", enc("Shredd-Kind", "episodic\xc3"), 400, "invalid_utf8"},
		{"holder", "/v1/encrypt/raw", enc("Shredd-Holder", "ann\xff"), 400, "invalid_utf8"},
		{"parent", "/v1/encrypt/raw", enc("Shredd-Parent", "\xff"), 400, "invalid_utf8"},
		{"lease", "/v1/encrypt/raw", enc("Shredd-Lease", "\xff"), 400, "invalid_utf8"},
		{"context", "/v1/encrypt/raw", enc("Shredd-Context", "\xffQ=="), 400, "invalid_utf8"},
		{"decrypt holder", "/v1/decrypt/raw", append(octets, "Shredd-Holder", "ann\xff"), 400, "invalid_utf8"},
		{"decrypt context", "/v1/decrypt/raw", append(octets, "Shredd-Context", "\xff"), 400, "invalid_utf8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", c.path, "raw bytes", c.hdr...)
			if r.status != c.status || str(r, "code") != c.code {
				t.Fatalf("got %d %q, want %d %q: %s", r.status, str(r, "code"), c.status, c.code, r.raw)
			}
			name := c.hdr[len(c.hdr)-2]
			if c.code != "" && !strings.Contains(str(r, "detail"), name) {
				t.Fatalf("detail %q does not name %s", str(r, "detail"), name)
			}
			if c.code != "" && (bytes.Contains(r.raw, []byte("alice")) || bytes.Contains(r.raw, []byte{0xff})) {
				t.Fatalf("the answer echoes a value: %s", r.raw)
			}
		})
	}
}

// TestSubjectIDsAreBytes shows that subject ids are compared as bytes,
// without Unicode normalization: "José" in NFC (U+00E9) and in NFD (e and
// U+0301) are two subjects, and forgetting one leaves the other readable.
func TestSubjectIDsAreBytes(t *testing.T) {
	e := newEnv(t, 0)
	e.setup()
	const nfc, nfd = "jos\u00e9@example.com", "jose\u0301@example.com"
	seal := func(subject string) string {
		r := e.do("POST", "/v1/encrypt", `{"subject":"`+subject+`","kind":"episodic","plaintext":"`+b64("tea")+`"}`)
		if r.status != 200 {
			t.Fatalf("encrypt: %d %v", r.status, r.body)
		}
		return str(r, "ciphertext")
	}
	ctNFC, ctNFD := seal(nfc), seal(nfd)
	// The same subjects written with JSON escapes are the same bytes.
	if r := e.do("POST", "/v1/forget", `{"subject":"jose\u0301@example.com"}`); r.status != 202 {
		t.Fatalf("forget NFD: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+ctNFC+`"}`); r.status != 200 || str(r, "plaintext") != b64("tea") {
		t.Fatalf("decrypt NFC after forgetting NFD: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/v1/decrypt", `{"ciphertext":"`+ctNFD+`"}`); r.status != 410 || str(r, "code") != "shredded" {
		t.Fatalf("decrypt NFD after forgetting NFD: %d %v", r.status, r.body)
	}
}
