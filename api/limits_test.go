package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shredd/shredd/api"
)

// doReader is do with a streamed body: n is its length, or -1 to send it
// chunked, without a Content-Length.
func (e *env) doReader(method, path string, body io.Reader, n int64) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.ContentLength = n
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type")}
	if err := json.Unmarshal(b, &r.body); err != nil {
		e.t.Fatalf("%s %s: body is not JSON: %q", method, path, b)
	}
	return r
}

// repeatReader reads n copies of one byte.
type repeatReader struct {
	b byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= int64(len(p))
	return len(p), nil
}

func quoted(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`"%s%d"`, prefix, i)
	}
	return out
}

// TestLimits is the table of request limits and bad input: each answers a
// problem with a stable code, or, inside a batch, a result with that code.
func TestLimits(t *testing.T) {
	e := newEnv(t, 0)
	art, ct := e.setup()

	// An artifact whose lineage is full: one more subject is over the limit.
	full := e.do("POST", "/v1/encrypt", `{"subjects":[`+strings.Join(quoted("s", 1024), ",")+`],"kind":"episodic","plaintext":""}`)
	if full.status != 200 || full.body["lineage_size"] != 1024.0 {
		t.Fatalf("encrypt with 1024 subjects: %d %v", full.status, full.body)
	}
	fullArt := str(full, "artifact")

	enc := func(fields string) string {
		return `{"kind":"episodic","subject":"a@example.com","plaintext":""` + fields + `}`
	}
	items := func(n int, item string) string {
		s := make([]string, n)
		for i := range s {
			s[i] = item
		}
		return batch(s...)
	}
	nest := func(n int) string { return `{"subjects":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}` }
	overBody := `"` + strings.Repeat("A", api.DefaultMaxBody) + `"`

	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     string // of the problem, or "" for success
		detail                   string // a part of the problem's detail
		items                    []string
	}{
		// Content type.
		{name: "text/plain", body: enc(""), hdr: []string{"Content-Type", "text/plain"}, status: 415, code: "unsupported_media_type"},
		{name: "no content type", body: enc(""), hdr: []string{"Content-Type", ""}, status: 415, code: "unsupported_media_type"},
		{name: "problem+json", body: enc(""), hdr: []string{"Content-Type", "application/problem+json"}, status: 415, code: "unsupported_media_type"},
		{name: "malformed content type", body: enc(""), hdr: []string{"Content-Type", "application/json; charset"}, status: 415, code: "unsupported_media_type"},
		{name: "json with charset", body: enc(""), hdr: []string{"Content-Type", "application/json; charset=utf-8"}, status: 200},
		{name: "json in capitals", body: enc(""), hdr: []string{"Content-Type", "Application/JSON"}, status: 200},
		{name: "batch text/plain", body: batch(enc("")), hdr: []string{"Content-Type", "text/plain"}, status: 415, code: "unsupported_media_type"},

		// Body size: the whole body, single or batch.
		{name: "body over the limit", body: enc(`,"context":` + overBody), status: 413, code: "body_too_large", detail: "1463637 bytes"},
		{name: "batch body over the limit", body: items(api.MaxBatch, `{"ciphertext":"`+strings.Repeat("A", api.DefaultMaxBody/api.MaxBatch)+`"}`), path: "/v1/decrypt", status: 413, code: "body_too_large"},

		// JSON syntax, schema and nesting.
		{name: "empty body", body: "", hdr: []string{"Content-Type", "application/json"}, status: 400, code: "invalid_json"},
		{name: "truncated", body: `{"kind":`, status: 400, code: "invalid_json"},
		{name: "not an object", body: `["kind"]`, status: 400, code: "invalid_json"},
		{name: "two values", body: enc("") + enc(""), status: 400, code: "invalid_json", detail: "more than one"},
		{name: "trailing garbage", body: enc("") + "x", status: 400, code: "invalid_json"},
		{name: "unknown field", body: enc(`,"extra":1`), status: 400, code: "invalid_json", detail: "extra"},
		{name: "wrong type", body: `{"kind":7}`, status: 400, code: "invalid_json", detail: `"kind"`},
		{name: "nested 32 deep", body: nest(api.MaxDepth), status: 400, code: "invalid_json", detail: "wrong type"},
		{name: "nested 33 deep", body: nest(api.MaxDepth + 1), status: 400, code: "invalid_json", detail: "nested deeper than 32"},
		{name: "nested 100000 deep", body: strings.Repeat("[", 100000), status: 400, code: "invalid_json", detail: "nested deeper than 32"},
		{name: "brackets in strings", body: enc(`,"holder":"x","context":"","subjects":["` + strings.Repeat(`[{\"`, 50) + `"]`), status: 200},

		// Strict JSON: what encoding/json would silently change. Subject ids
		// hold "alice", which no answer may echo.
		{name: "invalid UTF-8 in a subject", body: `{"kind":"episodic","subject":"alice` + "\xff" + `","plaintext":""}`, status: 400, code: "invalid_utf8", detail: `field "subject"`},
		{name: "invalid UTF-8 in subjects", body: `{"kind":"episodic","subjects":["alice","alice` + "\xc3" + `"],"plaintext":""}`, status: 400, code: "invalid_utf8", detail: `field "subjects"`},
		{name: "overlong UTF-8", body: `{"kind":"episodic","subject":"alice` + "\xc0\xaf" + `","plaintext":""}`, status: 400, code: "invalid_utf8"},
		{name: "UTF-8 of a surrogate", body: `{"kind":"episodic","subject":"alice` + "\xed\xa0\x80" + `","plaintext":""}`, status: 400, code: "invalid_utf8"},
		{name: "escaped lone high surrogate", body: `{"kind":"episodic","subject":"alice\ud800","plaintext":""}`, status: 400, code: "invalid_utf8", detail: `field "subject"`},
		{name: "escaped lone low surrogate", body: `{"kind":"episodic","subject":"\udc00alice","plaintext":""}`, status: 400, code: "invalid_utf8"},
		{name: "high surrogate then a letter", body: `{"kind":"episodic","subject":"alice\ud800\u0041","plaintext":""}`, status: 400, code: "invalid_utf8"},
		{name: "two high surrogates", body: `{"kind":"episodic","subject":"alice\ud800\ud800","plaintext":""}`, status: 400, code: "invalid_utf8"},
		{name: "escaped surrogate pair", body: `{"kind":"episodic","subject":"alice\ud83d\ude00","plaintext":""}`, status: 200},
		{name: "UTF-8 subject", body: `{"kind":"episodic","subject":"alice-é-😀","plaintext":""}`, status: 200},
		{name: "invalid UTF-8 in a description", method: "PUT", path: "/v1/kinds/episodic", body: `{"description":"` + "\xff" + `"}`, status: 400, code: "invalid_utf8", detail: `field "description"`},
		{name: "invalid UTF-8 in a context", body: enc(`,"context":"` + "\xff" + `"`), status: 400, code: "invalid_utf8", detail: `field "context"`},
		{name: "invalid UTF-8 in a key", body: enc(`,"` + "\xff" + `":1`), status: 400, code: "invalid_utf8", detail: "key"},
		{name: "invalid UTF-8 in a holder", path: "/v1/artifacts", body: `{"kind":"episodic","subject":"alice","holder":"h` + "\xff" + `"}`, status: 400, code: "invalid_utf8", detail: `field "holder"`},
		{name: "invalid UTF-8 in a forget", path: "/v1/forget", body: `{"subject":"alice` + "\xff" + `"}`, status: 400, code: "invalid_utf8", detail: `field "subject"`},
		{name: "invalid UTF-8 in a batch item", body: batch(enc(""), `{"kind":"episodic","subject":"alice`+"\xff"+`","plaintext":""}`), status: 400, code: "invalid_utf8", detail: `field "batch_input.subject"`},
		{name: "lone surrogate in a decrypt batch", path: "/v1/decrypt", body: batch(`{"ciphertext":"` + ct + `","holder":"\udfff"}`), status: 400, code: "invalid_utf8", detail: `field "batch_input.holder"`},
		{name: "duplicate subject", path: "/v1/forget", body: `{"subject":"alice","subject":"alice-2"}`, status: 400, code: "invalid_json", detail: `field "subject" is given twice`},
		{name: "duplicate escaped key", path: "/v1/forget", body: `{"subject":"alice","subj\u0065ct":"alice-2"}`, status: 400, code: "invalid_json", detail: "twice"},
		{name: "duplicate kind", body: enc(`,"kind":"episodic"`), status: 400, code: "invalid_json", detail: `field "kind" is given twice`},
		{name: "duplicate in a batch item", body: batch(enc(`,"plaintext":""`)), status: 400, code: "invalid_json", detail: `field "batch_input.plaintext" is given twice`},
		{name: "duplicate batch_input", body: `{"batch_input":[` + enc("") + `],"batch_input":[]}`, status: 400, code: "invalid_json", detail: `field "batch_input" is given twice`},
		{name: "duplicate in an inventory item", path: "/v1/holders/ann-1/inventory", body: `{"artifacts":[{"id":"` + art + `","id":"` + art + `","kind":"episodic"}]}`, status: 400, code: "invalid_json", detail: `field "artifacts.id" is given twice`},
		{name: "field name in capitals", path: "/v1/forget", body: `{"Subject":"alice"}`, status: 400, code: "invalid_json", detail: `case-sensitive: write "subject"`},
		{name: "field name in other case", body: `{"KIND":"episodic","subject":"alice","plaintext":""}`, status: 400, code: "invalid_json", detail: `write "kind"`},
		{name: "field name with the Kelvin sign", body: `{"\u212aind":"episodic","subject":"alice","plaintext":""}`, status: 400, code: "invalid_json", detail: `write "kind"`},
		{name: "field name in other case in a batch item", body: batch(`{"kind":"episodic","subject":"alice","Plaintext":""}`), status: 400, code: "invalid_json", detail: `write "batch_input.plaintext"`},
		{name: "case variant after the field", path: "/v1/forget", body: `{"subject":"alice","Subject":"alice-2"}`, status: 400, code: "invalid_json", detail: "case-sensitive"},
		{name: "unknown field that is data", path: "/v1/forget", body: `{"subject":"x","Alice@example.com":1}`, status: 400, code: "invalid_json", detail: "an unknown field"},

		// base64.
		{name: "bad base64", body: `{"kind":"episodic","subject":"a","plaintext":"%%%"}`, status: 400, code: "invalid_base64", detail: "plaintext"},
		{name: "unpadded base64", body: `{"kind":"episodic","subject":"a","plaintext":"YQ"}`, status: 400, code: "invalid_base64"},
		{name: "url-safe base64", body: `{"kind":"episodic","subject":"a","plaintext":"-_-_"}`, status: 400, code: "invalid_base64"},
		{name: "bad context base64", body: enc(`,"context":"!"`), status: 400, code: "invalid_base64", detail: "context"},
		{name: "base64 with a trailing LF", body: `{"kind":"episodic","subject":"a","plaintext":"YQ==\n"}`, status: 400, code: "invalid_base64", detail: "plaintext"},
		{name: "base64 with a trailing CRLF", body: `{"kind":"episodic","subject":"a","plaintext":"YQ==\r\n"}`, status: 400, code: "invalid_base64"},
		{name: "base64 with an inner LF", body: `{"kind":"episodic","subject":"a","plaintext":"YWJj\nZGVm"}`, status: 400, code: "invalid_base64"},
		{name: "base64 with a CR", body: `{"kind":"episodic","subject":"a","plaintext":"YQ=\r="}`, status: 400, code: "invalid_base64"},
		{name: "base64 with padding bits", body: `{"kind":"episodic","subject":"a","plaintext":"YR=="}`, status: 400, code: "invalid_base64", detail: "plaintext"},
		{name: "base64 with one padding bit set", body: `{"kind":"episodic","subject":"a","plaintext":"YWJ="}`, status: 400, code: "invalid_base64"},
		{name: "canonical base64", body: `{"kind":"episodic","subject":"a","plaintext":"YWI="}`, status: 200},
		{name: "canonical context", body: enc(`,"context":"Y3R5"`), status: 200},
		{name: "context with a LF", body: enc(`,"context":"Y3R4\n"`), status: 400, code: "invalid_base64", detail: "context"},
		{name: "context with padding bits", body: enc(`,"context":"YR=="`), status: 400, code: "invalid_base64", detail: "context"},
		{name: "decrypt context with padding bits", path: "/v1/decrypt", body: `{"ciphertext":"` + ct + `","context":"YR=="}`, status: 400, code: "invalid_base64", detail: "context"},
		{name: "decrypt context with a LF", path: "/v1/decrypt", body: `{"ciphertext":"` + ct + `","context":"\nYQ=="}`, status: 400, code: "invalid_base64"},
		{name: "bad decrypt context base64", path: "/v1/decrypt", body: `{"ciphertext":"` + ct + `","context":"!"}`, status: 400, code: "invalid_base64"},

		// Lineage, parents, subjects, context.
		{name: "lineage over the limit", body: `{"kind":"episodic","subject":"one-more","parents":["` + fullArt + `"],"plaintext":""}`, status: 413, code: "too_large", detail: "lineage of 1025 subjects, at most 1024"},
		{name: "lineage at the limit", body: `{"kind":"episodic","subject":"s7","parents":["` + fullArt + `"],"plaintext":""}`, status: 200},
		{name: "subjects over the limit", body: `{"kind":"episodic","subjects":[` + strings.Join(quoted("t", 1025), ",") + `],"plaintext":""}`, status: 413, code: "too_large", detail: "1025 subjects"},
		{name: "parents over the limit", body: `{"kind":"episodic","parents":[` + strings.Repeat(`"`+art+`",`, 256) + `"` + art + `"],"plaintext":""}`, status: 413, code: "too_large", detail: "257 parents"},
		{name: "context over the limit", body: enc(`,"context":"` + b64(strings.Repeat("c", 4097)) + `"`), status: 413, code: "too_large", detail: "context of 4097 bytes, at most 4096"},
		{name: "context at the limit", body: enc(`,"context":"` + b64(strings.Repeat("c", 4096)) + `"`), status: 200},
		{name: "subject id over the limit", body: `{"kind":"episodic","subject":"` + strings.Repeat("s", 1025) + `","plaintext":""}`, status: 400, code: "invalid_request"},
		{name: "subject id at the limit", body: `{"kind":"episodic","subject":"` + strings.Repeat("s", 1024) + `","plaintext":""}`, status: 200},
		{name: "empty subject id", body: `{"kind":"episodic","subjects":[""],"plaintext":""}`, status: 400, code: "invalid_request"},
		{name: "kind name over the limit", method: "PUT", path: "/v1/kinds/" + strings.Repeat("k", 65), status: 400, code: "invalid_request"},
		{name: "kind description over the limit", method: "PUT", path: "/v1/kinds/episodic", body: `{"description":"` + strings.Repeat("d", 1025) + `"}`, status: 400, code: "invalid_request"},
		{name: "holder over the limit", path: "/v1/artifacts", body: `{"kind":"episodic","subject":"a","holder":"` + strings.Repeat("h", 129) + `"}`, status: 400, code: "invalid_request"},

		// Batches: the shape of the body is checked before any item runs.
		{name: "batch over the limit", path: "/v1/decrypt", body: items(api.MaxBatch+1, `{"ciphertext":"x"}`), status: 413, code: "too_large", detail: "1001 items, at most 1000"},
		{name: "encrypt batch over the limit", body: items(api.MaxBatch+1, enc("")), status: 413, code: "too_large"},
		{name: "empty batch", body: `{"batch_input":[]}`, status: 400, code: "invalid_request", detail: "at least one"},
		{name: "empty decrypt batch", path: "/v1/decrypt", body: `{"batch_input":[]}`, status: 400, code: "invalid_request"},
		{name: "batch and single", body: `{"batch_input":[` + enc("") + `],"kind":"episodic"}`, status: 400, code: "invalid_request", detail: "cannot be combined"},
		{name: "batch and empty single field", body: `{"plaintext":"","batch_input":[` + enc("") + `]}`, status: 400, code: "invalid_request"},
		{name: "decrypt batch and single", path: "/v1/decrypt", body: `{"ciphertext":"` + ct + `","batch_input":[{"ciphertext":"` + ct + `"}]}`, status: 400, code: "invalid_request"},
		{name: "batch null item", body: `{"batch_input":[` + enc("") + `,null]}`, status: 400, code: "invalid_json", detail: "JSON object"},
		{name: "batch item not an object", body: `{"batch_input":[5]}`, status: 400, code: "invalid_json"},
		{name: "batch item unknown field", body: batch(enc(""), enc(`,"batch_input":[]`)), status: 400, code: "invalid_json", detail: "batch_input"},
		{name: "batch item wrong type", path: "/v1/decrypt", body: batch(`{"ciphertext":7}`), status: 400, code: "invalid_json", detail: "batch_input.ciphertext"},
		{name: "batch_input not an array", body: `{"batch_input":{}}`, status: 400, code: "invalid_json"},
		{name: "batch_input null", body: `{"batch_input":null}`, status: 400, code: "invalid_request"},
		{name: "batch_input escaped", body: `{"batch\u005finput":[` + enc("") + `]}`, status: 400, code: "invalid_json", detail: "unknown field"},
		{name: "batch_input in a value", body: enc(`,"subjects":["batch_input"]`), status: 200},
		{name: "batch of one", body: batch(enc("")), status: 200, items: []string{""}},
		{name: "batch item limits", body: batch(
			enc(`,"context":"`+b64(strings.Repeat("c", 4097))+`"`),
			`{"kind":"episodic","subject":"one-more","parents":["`+fullArt+`"],"plaintext":""}`,
			`{"kind":"episodic","subjects":[`+strings.Join(quoted("t", 1025), ",")+`],"plaintext":""}`,
			`{"kind":"episodic","subject":"`+strings.Repeat("s", 1025)+`","plaintext":""}`,
			`{"kind":"episodic","subject":"a","plaintext":"YQ"}`,
			`{"kind":"episodic","parents":["xyz"],"plaintext":""}`,
			enc(""),
		), status: 200, items: []string{"too_large", "too_large", "too_large", "invalid_request", "invalid_base64", "invalid_id", ""}},
		{name: "batch of failures is 200", path: "/v1/decrypt", body: batch(`{"ciphertext":"x"}`, `{}`), status: 200, items: []string{"invalid_envelope", "missing_field"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method, path := c.method, c.path
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/v1/encrypt"
			}
			r := e.do(method, path, c.body, c.hdr...)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %v", r.status, c.status, r.body)
			}
			if bytes.Contains(bytes.ToLower(r.raw), []byte("alice")) {
				t.Fatalf("the answer echoes a subject id: %s", r.raw)
			}
			if c.code == "" {
				if r.ctype != "application/json" {
					t.Fatalf("content type %q", r.ctype)
				}
				if c.items != nil {
					checkCodes(t, results(t, r), c.items...)
				}
				return
			}
			if r.ctype != "application/problem+json" || str(r, "code") != c.code || r.body["status"] != float64(c.status) ||
				str(r, "type") != "urn:shredd:problem:"+c.code || str(r, "title") == "" || str(r, "request_id") == "" {
				t.Fatalf("got %s %v, want a problem with code %q", r.ctype, r.body, c.code)
			}
			if !strings.Contains(str(r, "detail"), c.detail) {
				t.Fatalf("detail %q does not say %q", str(r, "detail"), c.detail)
			}
		})
	}

	// A body of unknown length (chunked) is cut at the limit too.
	r := e.doReader("POST", "/v1/encrypt", io.MultiReader(strings.NewReader(`{"kind":"episodic","subject":"a","plaintext":"`),
		&repeatReader{'A', api.DefaultMaxBody}, strings.NewReader(`"}`)), -1)
	if r.status != 413 || str(r, "code") != "body_too_large" {
		t.Fatalf("chunked body over the limit: %d %v", r.status, r.body)
	}
}

// TestPlaintextLimit sends one byte of plaintext more than an envelope
// holds, through a server whose body limit lets it in: 413 too_large. The
// body is 85 MiB; under the race detector the test takes about 10 s and
// 1.4 GB.
func TestPlaintextLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("an 85 MiB request")
	}
	e := newEnv(t, 100<<20)
	e.setup()
	const over = 64<<20 + 2 // a multiple of 3: base64 without padding
	head, tail := `{"kind":"episodic","subject":"a","plaintext":"`, `"}`
	n := int64(len(head)+len(tail)) + over/3*4
	r := e.doReader("POST", "/v1/encrypt", io.MultiReader(strings.NewReader(head), &repeatReader{'A', over / 3 * 4}, strings.NewReader(tail)), n)
	if r.status != 413 || str(r, "code") != "too_large" || !strings.Contains(str(r, "detail"), "plaintext of 67108866 bytes") {
		t.Fatalf("plaintext over the limit: %d %v", r.status, r.body)
	}
}
