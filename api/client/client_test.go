package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/testkit/shreddtest"
	"github.com/shredd/shredd/translog"
)

const adminToken = "shredd_client-test-admin"

// server is a real shredd API (shreddtest: real SQLite, local root file) on
// an httptest server.
type server struct {
	t      *testing.T
	srv    *httptest.Server
	tokens *access.Tokens
	// attPub verifies the attestations, logVKey the log's checkpoints.
	attPub  ed25519.PublicKey
	logVKey string
}

func newServer(t *testing.T) *server {
	t.Helper()
	return newServerWith(t, nil)
}

// newServerWith starts the server wired as cmd/shredd serve wires it (a
// transparency log and its journal, the attestation key), with now as the
// clock of the key tree, the registry and the journal (time.Now when nil).
func newServerWith(t *testing.T, now func() time.Time) *server {
	t.Helper()
	st := shreddtest.New(t, shreddtest.Options{Log: true, Now: now, AdminToken: adminToken})
	srv := httptest.NewServer(api.New(api.Config{Service: st.Service, Evidence: st.Evidence, Root: stackRoot(st), Tokens: st.Tokens}).Handler())
	t.Cleanup(srv.Close)
	return &server{t: t, srv: srv, tokens: st.Tokens, attPub: st.Signer.Public(), logVKey: st.LogVKey}
}

// post sends an admin POST with body over plain HTTP and decodes the
// answer of status want into out.
func (s *server) post(path, body string, want int, out any) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		s.t.Fatalf("POST %s: %d %s, want %d", path, resp.StatusCode, raw, want)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		s.t.Fatalf("POST %s: %v", path, err)
	}
}

// client returns a client of the server with token (the admin token when
// "").
func (s *server) client(token string, opts ...client.Option) *client.Client {
	s.t.Helper()
	if token == "" {
		token = adminToken
	}
	c, err := client.New(s.srv.URL, token, opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// token creates a token with scopes.
func (s *server) token(scopes ...string) string {
	s.t.Helper()
	_, raw, err := s.tokens.Create(context.Background(), "test-"+strings.Join(scopes, "-"), scopes, "", 0)
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// wantError checks that err is a *client.Error with status and code, with
// the problem's title and request id.
func wantError(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	e, ok := client.AsError(err)
	if !ok {
		t.Fatalf("error %v (%T), want a *client.Error %d %s", err, err, status, code)
	}
	if e.Status != status || e.Code != code || e.Title == "" || e.RequestID == "" || e.Op == "" {
		t.Fatalf("error %+v, want %d %s with title, request id and op", e, status, code)
	}
	if code != "" && e.Type != "urn:shredd:problem:"+code {
		t.Fatalf("error type %q", e.Type)
	}
	return e
}

func setupKinds(t *testing.T, c *client.Client, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		if _, _, err := c.PutKind(t.Context(), k, "test "+k); err != nil {
			t.Fatal(err)
		}
	}
}

// serverWithKinds starts a server with kinds and returns it and an admin
// client.
func serverWithKinds(t *testing.T, kinds ...string) (*server, *client.Client) {
	t.Helper()
	s := newServer(t)
	c := s.client("")
	setupKinds(t, c, kinds...)
	return s, c
}

func TestHealthNeedsNoToken(t *testing.T) {
	s := newServer(t)
	c, err := client.New(s.srv.URL+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.RootStore != "local" || h.RootVersion != 1 {
		t.Fatalf("health %+v", h)
	}
	// Without a token, the /v1 calls are refused.
	_, err = c.Kinds(t.Context())
	wantError(t, err, 401, "unauthenticated")
	if !client.IsUnauthorized(err) || client.IsForbidden(err) {
		t.Fatalf("IsUnauthorized false for %v", err)
	}
}

func TestKinds(t *testing.T) {
	s := newServer(t)
	c := s.client("")
	ctx := t.Context()
	k, created, err := c.PutKind(ctx, "episodic", "raw turns")
	if err != nil || !created || k.Name != "episodic" || k.Description != "raw turns" || k.CreatedAt.IsZero() {
		t.Fatalf("PutKind new: %+v %v %v", k, created, err)
	}
	k2, created, err := c.PutKind(ctx, "episodic", "raw turns, one per record")
	if err != nil || created || k2.Description != "raw turns, one per record" || !k2.CreatedAt.Equal(k.CreatedAt) {
		t.Fatalf("PutKind existing: %+v %v %v", k2, created, err)
	}
	if _, _, err := c.PutKind(ctx, "summary", ""); err != nil {
		t.Fatal(err)
	}
	ks, err := c.Kinds(ctx)
	if err != nil || len(ks) != 2 || ks[0].Name != "episodic" || ks[1].Name != "summary" {
		t.Fatalf("Kinds: %+v %v", ks, err)
	}
	_, _, err = c.PutKind(ctx, "Bad Kind", "")
	wantError(t, err, 400, "invalid_request")
	if _, _, err := c.PutKind(ctx, "", ""); err == nil {
		t.Fatal("PutKind with an empty name: no error")
	}
}

func TestEncryptDecrypt(t *testing.T) {
	_, c := serverWithKinds(t, "episodic")
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		pt, aad  []byte
		subjects []string
	}{
		{"text", []byte("Alice prefers green tea."), []byte("tenant=acme"), []string{"alice@example.com"}},
		{"binary", []byte{0, 1, 2, 0xff, '\n', 0}, nil, []string{"bob@example.com", "carol@example.com"}},
		{"empty", nil, nil, []string{"dave@example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each case is a unit of work: its write from what it read
			// answers for its own reads only, not for the other cases'.
			u := c.Unit()
			defer func() {
				if err := u.Close(ctx); err != nil {
					t.Error(err)
				}
			}()
			out, err := u.Encrypt(ctx, client.EncryptRequest{Subjects: tc.subjects, Kind: "episodic", Plaintext: tc.pt, Context: tc.aad})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.Ciphertext, "shredd:v1:") || len(out.Artifact) != 32 || out.LineageSize != len(tc.subjects) {
				t.Fatalf("Encrypt: %+v", out)
			}
			got, err := u.Decrypt(ctx, client.DecryptRequest{Ciphertext: out.Ciphertext, Context: tc.aad, Holder: "worker-1"})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Plaintext, tc.pt) || got.Artifact != out.Artifact || got.Kind != "episodic" {
				t.Fatalf("Decrypt: %+v, want plaintext %q", got, tc.pt)
			}
			if got.Lease.ID == "" || got.Lease.Artifact != out.Artifact || got.Lease.Holder != "worker-1" || got.Lease.Unit != u.ID() ||
				!got.Lease.ExpiresAt.After(got.Lease.IssuedAt) {
				t.Fatalf("Decrypt lease: %+v", got.Lease)
			}
			rel, err := c.ReleaseLease(ctx, got.Lease.ID)
			if err != nil || rel.ReleasedAt.IsZero() {
				t.Fatalf("ReleaseLease: %+v, %v", rel, err)
			}
			der, err := u.Encrypt(ctx, client.EncryptRequest{Leases: []string{got.Lease.ID}, Kind: "episodic", Plaintext: []byte("derived")})
			if err != nil || der.LineageSize != len(tc.subjects) {
				t.Fatalf("Encrypt from a lease: %+v, %v", der, err)
			}
			// Another context does not open it.
			_, err = u.Decrypt(ctx, client.DecryptRequest{Ciphertext: out.Ciphertext, Context: []byte("other")})
			wantError(t, err, 422, "invalid_envelope")
			if !client.IsInvalidEnvelope(err) || client.IsShredded(err) {
				t.Fatalf("IsInvalidEnvelope false for %v", err)
			}
		})
	}
	// A write outside the units answers for their reads (released, until
	// their leases expire): the failures below say they derive from none.
	_, err := c.Decrypt(ctx, client.DecryptRequest{Ciphertext: "shredd:v1:AAAA"})
	wantError(t, err, 422, "invalid_envelope")
	_, err = c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"a"}, Kind: "nokind", Independent: true})
	e := wantError(t, err, 400, "unknown_kind")
	if !strings.Contains(e.Error(), "400 unknown_kind") || !strings.Contains(e.Error(), "POST /v1/encrypt") {
		t.Fatalf("Error() = %q", e.Error())
	}
	_, err = c.Encrypt(ctx, client.EncryptRequest{Kind: "episodic", Independent: true})
	wantError(t, err, 400, "invalid_request")
}

func TestArtifacts(t *testing.T) {
	_, c := serverWithKinds(t, "episodic", "summary", "embedding")
	ctx := t.Context()
	rec, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"bob@example.com"}, Parents: []string{rec.Artifact}, Kind: "summary",
		Holder: "summarizer-1", Plaintext: []byte("y")})
	if err != nil || sum.LineageSize != 2 {
		t.Fatalf("derived Encrypt: %+v %v", sum, err)
	}
	a, err := c.Artifact(ctx, sum.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != sum.Artifact || a.Kind != "summary" || !a.Sealed || a.Holder != "summarizer-1" || len(a.Parents) != 1 ||
		a.Parents[0] != rec.Artifact || a.LineageSize != 2 || a.CreatedAt.IsZero() {
		t.Fatalf("Artifact: %+v", a)
	}
	reg, err := c.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding", Holder: "ann-index-1"})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Sealed || reg.Holder != "ann-index-1" || reg.Kind != "embedding" || reg.LineageSize != 1 || len(reg.ID) != 32 {
		t.Fatalf("Register: %+v", reg)
	}
	if a, err := c.Artifact(ctx, reg.ID); err != nil || a.Sealed || a.ID != reg.ID {
		t.Fatalf("Artifact of the registered one: %+v %v", a, err)
	}
	_, err = c.Artifact(ctx, "00000000000000000000000000000000")
	wantError(t, err, 404, "not_found")
	if !client.IsNotFound(err) {
		t.Fatalf("IsNotFound false for %v", err)
	}
	_, err = c.Artifact(ctx, "not/hex")
	wantError(t, err, 400, "invalid_id")
	_, err = c.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding"})
	wantError(t, err, 400, "invalid_request")
}

// TestForget runs a forget to its end: the token, its idempotence, 410 for
// everything of the subject's lineage, the epoch, the shredded state.
func TestForget(t *testing.T) {
	s, c := serverWithKinds(t, "episodic", "summary")
	ctx := t.Context()
	// The checks read with a token of their own that never writes: c's
	// writes below answer for no read (docs/api.md, "What a read costs a
	// writer").
	r := s.client(s.token(access.ScopeDecrypt))
	rec, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: []byte("tea")})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"bob@example.com"}, Parents: []string{rec.Artifact}, Kind: "summary", Plaintext: []byte("both tea")})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"bob@example.com"}, Kind: "episodic", Plaintext: []byte("coffee")})
	if err != nil {
		t.Fatal(err)
	}

	p, err := c.ForgetPreview(ctx, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !p.DryRun || p.Counts.Total != 2 || p.Counts.Direct != 1 || p.Counts.Collateral != 1 || len(p.Artifacts) != 2 ||
		p.Artifacts[0].Artifact != rec.Artifact || p.Artifacts[1].Artifact != sum.Artifact || p.Artifacts[1].Hops != 1 {
		t.Fatalf("preview = %+v", p)
	}
	if _, err := r.Decrypt(ctx, client.DecryptRequest{Ciphertext: rec.Ciphertext}); err != nil {
		t.Fatalf("the preview changed something: %v", err)
	}

	f, err := c.Forget(ctx, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.ID) != 32 || f.State != client.StateCommitted || f.CommittedAt.IsZero() || f.RequestedAt.IsZero() || f.Deadline.IsZero() ||
		!f.ShreddedAt.IsZero() || f.TProp() != keystore.DefaultCacheTTL || len(f.Conditions) == 0 {
		t.Fatalf("Forget: %+v", f)
	}
	again, err := c.Forget(ctx, "alice@example.com")
	if err != nil || again.ID != f.ID {
		t.Fatalf("Forget again: %+v %v, want the same forget %s", again, err, f.ID)
	}
	for _, ct := range []string{rec.Ciphertext, sum.Ciphertext} {
		_, err := r.Decrypt(ctx, client.DecryptRequest{Ciphertext: ct})
		e := wantError(t, err, 410, "shredded")
		if !client.IsShredded(err) || client.IsNotFound(err) || strings.Contains(e.Error(), "alice") {
			t.Fatalf("Decrypt after the forget: %v", err)
		}
	}
	if got, err := r.Decrypt(ctx, client.DecryptRequest{Ciphertext: bob.Ciphertext}); err != nil || string(got.Plaintext) != "coffee" {
		t.Fatalf("Bob's own record: %+v %v", got, err)
	}
	_, err = c.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: []byte("back")})
	wantError(t, err, 410, "shredded")
	_, err = c.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "summary", Holder: "cache-1"})
	wantError(t, err, 410, "shredded")

	got, err := c.GetForget(ctx, f.ID)
	if err != nil || got.ID != f.ID || got.State != client.StateCommitted {
		t.Fatalf("GetForget: %+v %v", got, err)
	}
	_, err = c.GetForget(ctx, "00000000000000000000000000000000")
	wantError(t, err, 404, "not_found")
	list, err := c.Forgets(ctx, client.StateCommitted)
	if err != nil || len(list) != 1 || list[0].ID != f.ID {
		t.Fatalf("Forgets(committed): %+v %v", list, err)
	}
	if list, err := c.Forgets(ctx, client.StateShredded); err != nil || len(list) != 0 {
		t.Fatalf("Forgets(shredded) before the epoch: %+v %v", list, err)
	}
	_, err = c.Forgets(ctx, "bogus")
	wantError(t, err, 400, "invalid_state")

	ep, err := c.Epoch(ctx)
	if err != nil || ep.Epoch != 1 || ep.RootVersion != 2 || len(ep.Retired) != 1 || ep.Retired[0] != 1 || ep.FinishedAt.Before(ep.StartedAt) {
		t.Fatalf("Epoch: %+v %v", ep, err)
	}
	got, err = c.GetForget(ctx, f.ID)
	if err != nil || got.State != client.StateShredded || got.ShreddedAt.IsZero() || got.RekeyedAt.IsZero() || got.Epoch != 1 {
		t.Fatalf("GetForget after the epoch: %+v %v", got, err)
	}
	for _, cond := range got.Conditions {
		if cond.Status != "ok" {
			t.Errorf("condition %+v after the epoch", cond)
		}
	}
	if list, err := c.Forgets(ctx, ""); err != nil || len(list) != 1 || list[0].State != client.StateShredded {
		t.Fatalf("Forgets(): %+v %v", list, err)
	}
	if h, err := c.Health(ctx); err != nil || h.RootVersion != 2 {
		t.Fatalf("Health after the epoch: %+v %v", h, err)
	}
}

func TestBatch(t *testing.T) {
	s, c := serverWithKinds(t, "episodic")
	ctx := t.Context()
	res, err := c.EncryptBatch(ctx, []client.EncryptRequest{
		{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: []byte("a"), Context: []byte("ctx-a")},
		{Subjects: []string{"bob@example.com"}, Kind: "notes", Plaintext: []byte("b")},
		{Subjects: []string{"carol@example.com"}, Kind: "episodic", Plaintext: []byte{0, 0xfe}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || res[0].Err != nil || res[2].Err != nil || res[1].Err == nil {
		t.Fatalf("EncryptBatch: %+v", res)
	}
	if e := res[1].Err; e.Status != 400 || e.Code != "unknown_kind" || e.RequestID == "" || !strings.Contains(e.Op, "item 1") || e.Type != "urn:shredd:problem:unknown_kind" {
		t.Fatalf("item error %+v", e)
	}
	if client.IsShredded(res[0].Err) || client.IsNotFound(res[0].Err) {
		t.Fatal("a nil item error counts as an error")
	}
	if _, err := c.Forget(ctx, "carol@example.com"); err != nil {
		t.Fatal(err)
	}
	dec, err := c.DecryptBatch(ctx, []client.DecryptRequest{
		{Ciphertext: res[0].Ciphertext, Context: []byte("ctx-a")},
		{Ciphertext: res[2].Ciphertext},
		{Ciphertext: res[0].Ciphertext},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dec) != 3 || dec[0].Err != nil || string(dec[0].Plaintext) != "a" || dec[0].Artifact != res[0].Artifact {
		t.Fatalf("DecryptBatch: %+v", dec)
	}
	if !client.IsShredded(dec[1].Err) || dec[1].Err.Code != "shredded" {
		t.Fatalf("item 1 after the forget: %+v", dec[1].Err)
	}
	if !client.IsInvalidEnvelope(dec[2].Err) {
		t.Fatalf("item 2 without its context: %+v", dec[2].Err)
	}
	// The batch as a whole: empty, too large.
	_, err = c.DecryptBatch(ctx, nil)
	wantError(t, err, 400, "invalid_request")
	_, err = c.EncryptBatch(ctx, make([]client.EncryptRequest, client.MaxBatch+1))
	wantError(t, err, 413, "too_large")
	// Scopes apply to batches as to single calls.
	_, err = s.client(s.token(access.ScopeEncrypt)).DecryptBatch(ctx, []client.DecryptRequest{{Ciphertext: res[0].Ciphertext}})
	wantError(t, err, 403, "forbidden")
}

// TestAuthErrors maps 401 and 403 for every method that needs a token.
func TestAuthErrors(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	setupKinds(t, s.client(""), "episodic")
	const zero = "00000000000000000000000000000000"
	calls := []struct {
		name    string
		lacking string // a scope that does not let the call through
		call    func(*client.Client) error
	}{
		{"Kinds", access.ScopeForget, func(c *client.Client) error { _, err := c.Kinds(ctx); return err }},
		{"PutKind", access.ScopeEncrypt, func(c *client.Client) error { _, _, err := c.PutKind(ctx, "k", ""); return err }},
		{"Encrypt", access.ScopeDecrypt, func(c *client.Client) error { _, err := c.Encrypt(ctx, client.EncryptRequest{}); return err }},
		{"EncryptBatch", access.ScopeDecrypt, func(c *client.Client) error {
			_, err := c.EncryptBatch(ctx, []client.EncryptRequest{{}})
			return err
		}},
		{"Decrypt", access.ScopeEncrypt, func(c *client.Client) error { _, err := c.Decrypt(ctx, client.DecryptRequest{}); return err }},
		{"DecryptBatch", access.ScopeEncrypt, func(c *client.Client) error {
			_, err := c.DecryptBatch(ctx, []client.DecryptRequest{{}})
			return err
		}},
		{"Register", access.ScopeAudit, func(c *client.Client) error { _, err := c.Register(ctx, client.RegisterRequest{}); return err }},
		{"Artifact", access.ScopeForget, func(c *client.Client) error { _, err := c.Artifact(ctx, zero); return err }},
		{"Forget", access.ScopeAudit, func(c *client.Client) error { _, err := c.Forget(ctx, ""); return err }},
		{"Forgets", access.ScopeEncrypt, func(c *client.Client) error { _, err := c.Forgets(ctx, ""); return err }},
		{"GetForget", access.ScopeEncrypt, func(c *client.Client) error { _, err := c.GetForget(ctx, zero); return err }},
		{"Epoch", access.ScopeAudit, func(c *client.Client) error { _, err := c.Epoch(ctx); return err }},
	}
	none, _ := client.New(s.srv.URL, "")
	wrong := s.client("shredd_wrong")
	scoped := map[string]*client.Client{}
	for _, sc := range access.AllScopes {
		scoped[sc] = s.client(s.token(sc))
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, c.call(none), 401, "unauthenticated")
			err := c.call(wrong)
			wantError(t, err, 401, "invalid_token")
			if !client.IsUnauthorized(err) || client.IsForbidden(err) {
				t.Fatalf("IsUnauthorized false for %v", err)
			}
			err = c.call(scoped[c.lacking])
			wantError(t, err, 403, "forbidden")
			if !client.IsForbidden(err) || client.IsUnauthorized(err) {
				t.Fatalf("IsForbidden false for %v", err)
			}
		})
	}
}

// recorder is a real transport that keeps the requests it sent.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func TestOptions(t *testing.T) {
	s := newServer(t)
	rec := &recorder{}
	c := s.client("", client.WithHTTPClient(&http.Client{Transport: rec}), client.WithUserAgent("memory-writer/2"))
	if _, err := c.Kinds(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(rec.reqs) != 1 {
		t.Fatalf("the http.Client of WithHTTPClient sent %d requests", len(rec.reqs))
	}
	r := rec.reqs[0]
	if r.Header.Get("User-Agent") != "memory-writer/2" || r.Header.Get("Authorization") != "Bearer "+adminToken {
		t.Fatalf("request headers %v", r.Header)
	}
	small := s.client("", client.WithMaxResponse(10))
	if _, err := small.Health(t.Context()); err == nil || !strings.Contains(err.Error(), "over 10 bytes") {
		t.Fatalf("a response over WithMaxResponse: %v", err)
	}
}

// TestPathPrefix serves the API under a prefix, as a proxy may.
func TestPathPrefix(t *testing.T) {
	s := newServer(t)
	mux := http.NewServeMux()
	target, _ := url.Parse(s.srv.URL)
	mux.Handle("/shredd/", http.StripPrefix("/shredd", httputil.NewSingleHostReverseProxy(target)))
	proxy := httptest.NewServer(mux)
	t.Cleanup(proxy.Close)
	c, err := client.New(proxy.URL+"/shredd/", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutKind(t.Context(), "episodic", ""); err != nil {
		t.Fatal(err)
	}
	if ks, err := c.Kinds(t.Context()); err != nil || len(ks) != 1 {
		t.Fatalf("Kinds through the prefix: %+v %v", ks, err)
	}
}

// TestNonProblemErrors: a proxy in front of a server that is down answers
// 502 without problem details; the client still returns a *client.Error.
func TestNonProblemErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	target, _ := url.Parse(dead)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	c, _ := client.New(proxy.URL, adminToken)
	_, err = c.Kinds(t.Context())
	e, ok := client.AsError(err)
	if !ok || e.Status != http.StatusBadGateway || e.Code != "" || e.Title != "Bad Gateway" {
		t.Fatalf("through a proxy to a dead server: %v (%+v)", err, e)
	}
	// Straight to the dead server: a transport error, not a *client.Error.
	c, _ = client.New(dead, adminToken)
	_, err = c.Kinds(t.Context())
	if _, ok := client.AsError(err); err == nil || ok {
		t.Fatalf("to a dead server: %v", err)
	}
}

func TestContext(t *testing.T) {
	s := newServer(t)
	c := s.client("")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Kinds(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
	ctx, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	if _, err := c.Health(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past deadline: %v", err)
	}
}

func TestNew(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:7750", "ftp://host", "http://", "http://user:pw@host", "http://host/?q=1", "http://host/#f", "://bad"} {
		if _, err := client.New(u, "t"); err == nil {
			t.Errorf("New(%q): no error", u)
		}
	}
	for _, u := range []string{client.DefaultURL, "https://shredd.internal", "http://[::1]:7750/prefix/"} {
		if _, err := client.New(u, "t"); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
	if _, err := client.New(client.DefaultURL, "t", client.WithHTTPClient(nil)); err == nil {
		t.Error("WithHTTPClient(nil): no error")
	}
}

// TestHolderBoundToken: a token bound to a holder registers as that holder
// without naming it, and is refused (403 wrong_holder) another holder's
// artifacts.
func TestHolderBoundToken(t *testing.T) {
	s, admin := serverWithKinds(t, "episodic", "embedding")
	ctx := t.Context()
	rec, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := admin.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding", Holder: "ann-index-2"})
	if err != nil {
		t.Fatal(err)
	}
	_, raw, err := s.tokens.Create(ctx, "ann-1", []string{access.ScopeRegister}, "ann-index-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	c := s.client(raw)
	mine, err := c.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding"})
	if err != nil || mine.Holder != "ann-index-1" {
		t.Fatalf("Register with a holder-bound token: %+v %v", mine, err)
	}
	if a, err := c.Artifact(ctx, mine.ID); err != nil || a.ID != mine.ID {
		t.Fatalf("Artifact of its own holder: %+v %v", a, err)
	}
	_, err = c.Artifact(ctx, other.ID)
	wantError(t, err, 403, "wrong_holder")
	_, err = c.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding", Holder: "ann-index-2"})
	wantError(t, err, 403, "wrong_holder")
	if !client.IsForbidden(err) {
		t.Fatal("IsForbidden false for wrong_holder")
	}
}

// clockedWithRecord starts a server on a test clock with the kind episodic
// and seals one record of subject (plaintext pt); it returns the server, a
// client with the admin token, and the clock.
func clockedWithRecord(t *testing.T, subject, pt string) (*server, *client.Client, *shreddtest.Clock) {
	t.Helper()
	clk := shreddtest.NewClock()
	s := newServerWith(t, clk.Now)
	c := s.client("")
	setupKinds(t, c, "episodic")
	if _, err := c.Encrypt(t.Context(), client.EncryptRequest{Subjects: []string{subject}, Kind: "episodic", Plaintext: []byte(pt)}); err != nil {
		t.Fatal(err)
	}
	return s, c, clk
}

// TestAttestationExportCheckpoint drives a forget to erasure on a test
// clock and fetches its files with the client: the attestation byte for
// byte, the export (checked by bundle.Verify, with a consistency proof
// from a checkpoint saved before the forget), and checkpoints; and the
// errors of each before erasure and for a token without the scope.
func TestAttestationExportCheckpoint(t *testing.T) {
	s, c, clk := clockedWithRecord(t, "alice@example.com", "tea")
	ctx := t.Context()
	v, err := note.NewVerifier(s.logVKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := s.attPub

	saved, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, err := translog.OpenCheckpoint(saved, v)
	if err != nil || old.Size != 1 {
		t.Fatalf("Checkpoint: %+v %v\n%s", old, err, saved)
	}
	// The client's Forget keeps neither the commitment salt nor the
	// verification: the forget and the verify calls go over plain HTTP.
	var f struct {
		ID             string `json:"forget"`
		CommitmentSalt string `json:"commitment_salt"`
		State          string `json:"state"`
	}
	s.post("/v1/forget", `{"subject":"alice@example.com"}`, 202, &f)
	_, err = c.Attestation(ctx, f.ID)
	wantError(t, err, 409, "not_erased")
	_, err = c.Export(ctx, f.ID, 0)
	wantError(t, err, 409, "not_erased")
	_, err = c.Export(ctx, "00000000000000000000000000000000", 0)
	wantError(t, err, 404, "not_found")

	if _, err := c.Epoch(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute) // past the key cache TTL
	if s.post("/v1/forgets/"+f.ID+"/verify", "", 200, &f); f.State != "erased" {
		t.Fatalf("verify: %s, want erased", f.State)
	}

	att, err := c.Attestation(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.Open(att, pub)
	if err != nil {
		t.Fatalf("the attestation does not open: %v\n%s", err, att)
	}
	salt, err := hex.DecodeString(f.CommitmentSalt)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckSubject("alice@example.com", salt); err != nil {
		t.Fatal(err)
	}

	cur, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := translog.OpenCheckpoint(cur, v)
	if err != nil || cp.Size <= old.Size {
		t.Fatalf("Checkpoint after erasure: %+v %v", cp, err)
	}
	raw, err := c.Export(ctx, f.ID, old.Size)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Attestation, att) || !bytes.Equal(b.Checkpoint, cur) {
		t.Fatalf("the export's attestation or checkpoint differ from the ones served")
	}
	rep, err := bundle.Verify(b, bundle.Options{AttestationKey: pub, LogKey: s.logVKey, Subject: "alice@example.com", Salt: salt, Saved: saved})
	if err != nil || !rep.SubjectChecked || rep.Consistent == "" {
		t.Fatalf("bundle.Verify: %+v %v", rep, err)
	}
	_, err = c.Export(ctx, f.ID, cp.Size+1)
	wantError(t, err, 400, "invalid_request")

	// The scopes: forget may fetch the attestation and the export, not the
	// checkpoint; audit all three; encrypt none.
	forgetOnly := s.client(s.token(access.ScopeForget))
	if _, err := forgetOnly.Export(ctx, f.ID, 0); err != nil {
		t.Fatalf("Export with the forget scope: %v", err)
	}
	_, err = forgetOnly.Checkpoint(ctx)
	wantError(t, err, 403, "forbidden")
	audit := s.client(s.token(access.ScopeAudit))
	if got, err := audit.Attestation(ctx, f.ID); err != nil || !bytes.Equal(got, att) {
		t.Fatalf("Attestation with the audit scope: %v", err)
	}
	if _, err := audit.Checkpoint(ctx); err != nil {
		t.Fatalf("Checkpoint with the audit scope: %v", err)
	}
	_, err = s.client(s.token(access.ScopeEncrypt)).Attestation(ctx, f.ID)
	wantError(t, err, 403, "forbidden")
}

// TestLiveAndReady: Live and Ready need no token; Ready reports the 503
// not_ready of a server whose database no longer accepts a write.
func TestLiveAndReady(t *testing.T) {
	st := shreddtest.New(t, shreddtest.Options{})
	srv := httptest.NewServer(api.New(api.Config{Service: st.Service, Evidence: st.Evidence, Root: stackRoot(st), Tokens: st.Tokens}).Handler())
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Live(t.Context()); err != nil {
		t.Fatalf("live: %v", err)
	}
	if err := c.Ready(t.Context()); err != nil {
		t.Fatalf("ready: %v", err)
	}
	st.DB.Close()
	var e *client.Error
	if err := c.Ready(t.Context()); !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.Code != "not_ready" {
		t.Fatalf("ready with the database closed: %v, want 503 not_ready", err)
	}
	if err := c.Live(t.Context()); err != nil {
		t.Fatalf("live with the database closed: %v", err)
	}
}
