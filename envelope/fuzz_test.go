package envelope_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/shredd/shredd/envelope"
)

// maxSeed keeps the large lineage vectors out of the fuzz corpora: they
// would slow every mutation down without exercising anything new.
const maxSeed = 8 << 10

// vectorBytes decodes a vector's text form leniently (the padding and
// alphabet vectors are not valid text but make fine binary seeds).
func vectorBytes(text string) ([]byte, bool) {
	_, body, _ := strings.Cut(text, ":v1:")
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(strings.ReplaceAll(body, " ", "")); err == nil {
			return b, true
		}
	}
	return nil, false
}

// isParseError reports whether err is one of the errors Parse may return.
func isParseError(err error) bool {
	return errors.Is(err, envelope.ErrMalformed) || errors.Is(err, envelope.ErrUnsupported)
}

// FuzzParse checks that Parse never panics, fails only with its documented
// errors, and accepts only canonical bytes: Marshal gives back exactly the
// input, and the text form round-trips.
func FuzzParse(f *testing.F) {
	for _, v := range loadVectors(f) {
		if b, ok := vectorBytes(v.text); ok && len(b) <= maxSeed {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := envelope.Parse(b)
		if err != nil {
			if e != nil || !isParseError(err) {
				t.Fatalf("Parse: %v, %v", e, err)
			}
			return
		}
		if got := e.Marshal(); !bytes.Equal(got, b) {
			t.Fatalf("Marshal after Parse:\n got %x\nwant %x", got, b)
		}
		s := e.String()
		p, err := envelope.ParseText(s)
		if err != nil {
			t.Fatalf("ParseText(String()): %v", err)
		}
		if p.String() != s || !bytes.Equal(p.Marshal(), b) {
			t.Fatal("text form does not round-trip")
		}
	})
}

// FuzzParseText checks that ParseText never panics, fails only with its
// documented errors, and accepts exactly one spelling of each envelope.
func FuzzParseText(f *testing.F) {
	for _, v := range loadVectors(f) {
		if len(v.text) <= maxSeed {
			f.Add(v.text)
		}
	}
	f.Add("")
	f.Add("shredd:v1:")
	f.Add("shredd:v2:U0hSRA")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := envelope.ParseText(s)
		if err != nil {
			if e != nil || !isParseError(err) {
				t.Fatalf("ParseText: %v, %v", e, err)
			}
			return
		}
		if got := e.String(); got != s {
			t.Fatalf("String after ParseText:\n got %q\nwant %q", got, s)
		}
		p, err := envelope.Parse(e.Marshal())
		if err != nil || p.String() != s {
			t.Fatalf("Parse(Marshal()): %v", err)
		}
	})
}

// FuzzOpen opens arbitrary bytes with the fixed keys of the success vectors
// and checks that Open never panics, fails only with its documented errors,
// and succeeds only for an envelope byte-identical to a sealed one, with its
// context, giving its plaintext.
func FuzzOpen(f *testing.F) {
	type sealed struct{ context, plaintext []byte }
	keyOf := make(map[envelope.Ref][]byte)
	known := make(map[string]sealed)
	for _, v := range loadVectors(f) {
		b, ok := vectorBytes(v.text)
		if !ok {
			continue
		}
		if v.expect == "success" {
			known[string(b)] = sealed{v.context, v.plaintext}
			for i, k := range v.keys {
				keyOf[v.lineage[i]] = k
			}
		}
		if len(b) <= maxSeed {
			f.Add(b, v.context)
		}
	}
	// keysFor returns the fixed keys known for e's lineage refs.
	keysFor := func(e *envelope.Envelope) []envelope.SubjectKey {
		var keys []envelope.SubjectKey
		for _, r := range e.Header.Lineage {
			if k, ok := keyOf[r]; ok {
				keys = append(keys, envelope.SubjectKey{Ref: r, Key: k})
			}
		}
		return keys
	}
	// The oracle needs every envelope that opens with these keys to be a
	// success vector; the generator keeps failure vectors on other subjects.
	for _, v := range loadVectors(f) {
		b, ok := vectorBytes(v.text)
		if !ok || v.expect == "success" {
			continue
		}
		if e, err := envelope.Parse(b); err == nil {
			if _, err := envelope.Open(e, keysFor(e), v.context); err == nil {
				if _, ok := known[string(b)]; !ok {
					f.Fatalf("vector %s opens with the keys of the success vectors", v.name)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, b, context []byte) {
		e, err := envelope.Parse(b)
		if err != nil {
			return
		}
		pt, err := envelope.Open(e, keysFor(e), context)
		if err != nil {
			if pt != nil || !(errors.Is(err, envelope.ErrOpen) || errors.Is(err, envelope.ErrInvalid) || errors.Is(err, envelope.ErrTooLarge)) {
				t.Fatalf("Open: %x, %v", pt, err)
			}
			return
		}
		s, ok := known[string(b)]
		if !ok || !bytes.Equal(s.context, context) || !bytes.Equal(s.plaintext, pt) {
			t.Fatalf("Open succeeded on bytes that were never sealed with this context:\n%x\ncontext %x", b, context)
		}
	})
}
