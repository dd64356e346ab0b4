package api_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/testkit/shreddtest"
)

const token = "shredd_test-token"

type env struct {
	t      testing.TB
	srv    *httptest.Server
	log    *bytes.Buffer
	tokens *access.Tokens
	hasher *registry.Hasher
	// attPub verifies attestations and log events; logVerifier the log's
	// checkpoints, of key logVKey (nil and "" when the server keeps no log).
	attPub      ed25519.PublicKey
	logVerifier note.Verifier
	logVKey     string
}

// envOptions configures newEnvWith. The zero value is the server of
// cmd/shredd serve: a transparency log and its journal, the real clock.
type envOptions struct {
	maxBody int64
	// noLog runs the service without a transparency log.
	noLog bool
	// now, when set, is the clock of the key tree, the registry and the
	// journal (the tokens keep the real clock).
	now func() time.Time
}

func newEnv(t testing.TB, maxBody int64) *env {
	t.Helper()
	return newEnvWith(t, envOptions{maxBody: maxBody})
}

// newEnvWith starts the real router on 127.0.0.1 over the service of
// shreddtest, wired as cmd/shredd/serve.go wires it: the log in the
// service's database, one journal for the key tree and the registry, the
// attestation key for both attestations and log events.
func newEnvWith(t testing.TB, o envOptions) *env {
	t.Helper()
	st := shreddtest.New(t, shreddtest.Options{Log: !o.noLog, Now: o.now, AdminToken: token})
	e := &env{t: t, tokens: st.Tokens, hasher: st.Hasher, attPub: st.Signer.Public(), logVKey: st.LogVKey}
	if !o.noLog {
		e.logVerifier = st.LogVerifier(t)
	}
	var logs bytes.Buffer
	s := api.New(api.Config{Service: st.Service, Evidence: st.Evidence, Root: stackRoot(st), Log: slog.New(slog.NewJSONHandler(&logs, nil)),
		Tokens: st.Tokens, Metrics: api.NewMetrics(st.Service, stackKeys(st)), MaxBody: o.maxBody})
	e.srv = httptest.NewServer(s.Handler())
	t.Cleanup(e.srv.Close)
	e.log = &logs
	return e
}

type reply struct {
	status int
	ctype  string
	body   map[string]any // the decoded body, for JSON media types
	raw    []byte
	header http.Header
}

func (e *env) do(method, path, body string, hdr ...string) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), raw: b, header: resp.Header}
	if len(b) > 0 && (strings.Contains(r.ctype, "json") || r.ctype == "") {
		if err := json.Unmarshal(b, &r.body); err != nil {
			e.t.Fatalf("%s %s: body is not JSON: %q", method, path, b)
		}
	}
	return r
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func str(r reply, k string) string { s, _ := r.body[k].(string); return s }

// setup registers a kind and seals one record; it returns its artifact id
// and ciphertext.
func (e *env) setup() (string, string) {
	e.t.Helper()
	if r := e.do("PUT", "/v1/kinds/episodic", ""); r.status != 201 {
		e.t.Fatalf("put kind: %d %v", r.status, r.body)
	}
	r := e.do("POST", "/v1/encrypt", `{"subject":"alice@example.com","kind":"episodic","plaintext":"`+b64("tea")+`"}`)
	if r.status != 200 {
		e.t.Fatalf("encrypt: %d %v", r.status, r.body)
	}
	return str(r, "artifact"), str(r, "ciphertext")
}

// TestRoutes checks every method and path of the router, authenticated, and
// that every /v1 route refuses a missing or wrong token.
func TestRoutes(t *testing.T) {
	e := newEnv(t, 0)
	art, ct := e.setup()
	forget := e.do("POST", "/v1/forget", `{"subject":"zed@example.com"}`)
	if forget.status != 202 {
		t.Fatalf("forget: %d %v", forget.status, forget.body)
	}
	fid := str(forget, "forget")
	routes := []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/livez", "", 200},
		{"GET", "/readyz", "", 200},
		{"POST", "/readyz", "", 405},
		{"GET", "/v1/kinds", "", 200},
		{"PUT", "/v1/kinds/episodic", `{"description":"updated"}`, 200},
		{"PUT", "/v1/kinds/summary", "", 201},
		{"PUT", "/v1/kinds/Bad%20Kind", "", 400},
		{"POST", "/v1/encrypt", `{"subject":"bob@example.com","kind":"episodic","plaintext":"` + b64("x") + `"}`, 200},
		{"POST", "/v1/decrypt", `{"ciphertext":"` + ct + `"}`, 200},
		{"POST", "/v1/artifacts", `{"parents":["` + art + `"],"kind":"episodic","holder":"ann-1"}`, 201},
		{"GET", "/v1/artifacts/" + art, "", 200},
		{"GET", "/v1/artifacts/00000000000000000000000000000000", "", 404},
		{"GET", "/v1/artifacts/nothex", "", 400},
		{"POST", "/v1/forget", `{"subject":"zed@example.com"}`, 202},
		{"GET", "/v1/forgets", "", 200},
		{"GET", "/v1/forgets?state=committed", "", 200},
		{"GET", "/v1/forgets?state=bogus", "", 400},
		{"GET", "/v1/forgets/" + fid, "", 200},
		{"GET", "/v1/forgets/00000000000000000000000000000000", "", 404},
		{"POST", "/v1/epoch", "", 200},
		{"POST", "/v1/subjects/reinstate", `{"subject":"never-seen@example.com"}`, 409},
		{"POST", "/v1/subjects/reinstate", `{"subject":"zed@example.com"}`, 409},
		{"POST", "/v1/subjects/reinstate", `{}`, 400},
		{"GET", "/v1/forgets/" + fid + "/attestation", "", 409},
		{"GET", "/v1/forgets/" + fid + "/export", "", 409},
		{"GET", "/v1/forgets/" + fid + "/export?since=x", "", 400},
		{"GET", "/v1/log/checkpoint", "", 200},
		{"GET", "/v1/log/key", "", 200},
		{"GET", "/v1/log/tile/entries/000.p/1", "", 200},
		{"GET", "/v1/log/tile/entries/999", "", 404},
		{"GET", "/v1/log/tile/entries/1", "", 400},
		{"GET", "/v1/log/proof/0", "", 200},
		{"GET", "/v1/log/proof/999", "", 404},
		{"GET", "/v1/log/consistency?old=1", "", 200},
		{"POST", "/v1/log/checkpoint", "", 405},
		{"GET", "/v1/encrypt", "", 405},
		{"DELETE", "/v1/kinds/episodic", "", 405},
		{"GET", "/v1/nope", "", 404},
		{"GET", "/nope", "", 404},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			r := e.do(rt.method, rt.path, rt.body)
			if r.status != rt.want {
				t.Fatalf("status %d, want %d: %v", r.status, rt.want, r.body)
			}
			if r.status >= 400 && (r.ctype != "application/problem+json" || str(r, "code") == "" || str(r, "request_id") == "") {
				t.Fatalf("error without problem details: %s %v", r.ctype, r.body)
			}
			if !strings.HasPrefix(rt.path, "/v1/") || r.status == 404 || r.status == 405 {
				return
			}
			for _, bad := range []string{"", "Bearer wrong", "Basic " + token, "Bearer"} {
				r := e.do(rt.method, rt.path, rt.body, "Authorization", bad)
				if r.status != 401 {
					t.Fatalf("with Authorization %q: status %d, want 401", bad, r.status)
				}
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, 4096)
	art, ct := e.setup()
	big := strings.Repeat("A", 8192)
	cases := []struct {
		name, path, body string
		hdr              []string
		status           int
		code             string
	}{
		{"wrong content type", "/v1/encrypt", `{}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
		{"no content type", "/v1/decrypt", `{}`, []string{"Content-Type", ""}, 415, "unsupported_media_type"},
		{"invalid json", "/v1/encrypt", `{"kind":`, nil, 400, "invalid_json"},
		{"unknown field", "/v1/encrypt", `{"kind":"episodic","subject":"a","plaintext":"","extra":1}`, nil, 400, "invalid_json"},
		{"wrong type", "/v1/encrypt", `{"kind":7}`, nil, 400, "invalid_json"},
		{"two objects", "/v1/forget", `{"subject":"a"}{"subject":"b"}`, nil, 400, "invalid_json"},
		{"bad base64", "/v1/encrypt", `{"kind":"episodic","subject":"a","plaintext":"%%%"}`, nil, 400, "invalid_base64"},
		{"bad context base64", "/v1/decrypt", `{"ciphertext":"` + ct + `","context":"!"}`, nil, 400, "invalid_base64"},
		{"missing kind", "/v1/encrypt", `{"subject":"a","plaintext":""}`, nil, 400, "missing_field"},
		{"unknown kind", "/v1/encrypt", `{"subject":"a","kind":"nokind","plaintext":""}`, nil, 400, "unknown_kind"},
		{"unknown parent", "/v1/encrypt", `{"parents":["00000000000000000000000000000001"],"kind":"episodic","plaintext":""}`, nil, 400, "unknown_parent"},
		{"bad parent id", "/v1/encrypt", `{"parents":["xyz"],"kind":"episodic","plaintext":""}`, nil, 400, "invalid_id"},
		{"no subject", "/v1/encrypt", `{"kind":"episodic","plaintext":""}`, nil, 400, "invalid_request"},
		{"body too large", "/v1/encrypt", `{"kind":"episodic","subject":"a","plaintext":"` + big + `"}`, nil, 413, "body_too_large"},
		{"garbage ciphertext", "/v1/decrypt", `{"ciphertext":"shredd:v1:AAAA"}`, nil, 422, "invalid_envelope"},
		{"wrong context", "/v1/decrypt", `{"ciphertext":"` + ct + `","context":"` + b64("other") + `"}`, nil, 422, "invalid_envelope"},
		{"missing ciphertext", "/v1/decrypt", `{}`, nil, 400, "missing_field"},
		{"register without holder", "/v1/artifacts", `{"parents":["` + art + `"],"kind":"episodic"}`, nil, 400, "invalid_request"},
		{"forget without subject", "/v1/forget", `{}`, nil, 400, "missing_field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", c.path, c.body, c.hdr...)
			if r.status != c.status || str(r, "code") != c.code {
				t.Fatalf("got %d %q, want %d %q: %v", r.status, str(r, "code"), c.status, c.code, r.body)
			}
		})
	}
}

// TestShreddedIs410 checks the 410 mapping and that neither the subject id
// nor the plaintext reaches a response or the log.
func TestShreddedIs410(t *testing.T) {
	e := newEnv(t, 0)
	_, ct := e.setup()
	if r := e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`); r.status != 202 || str(r, "state") != "committed" {
		t.Fatalf("forget: %d %v", r.status, r.body)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/decrypt", `{"ciphertext":"` + ct + `"}`},
		{"/v1/encrypt", `{"subject":"alice@example.com","kind":"episodic","plaintext":"` + b64("tea") + `"}`},
		{"/v1/artifacts", `{"subject":"alice@example.com","kind":"episodic","holder":"cache-1"}`},
	} {
		r := e.do("POST", c.path, c.body)
		if r.status != 410 || str(r, "code") != "shredded" {
			t.Fatalf("%s: %d %v, want 410 shredded", c.path, r.status, r.body)
		}
		if b, _ := json.Marshal(r.body); bytes.Contains(b, []byte("alice")) {
			t.Fatalf("response names the subject: %s", b)
		}
	}
	if strings.Contains(e.log.String(), "alice") || strings.Contains(e.log.String(), b64("tea")) {
		t.Fatalf("log holds the subject id or plaintext:\n%s", e.log.String())
	}
}
