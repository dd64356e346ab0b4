package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/envelope"
)

// TestScopeMatrix runs every /v1 route with every kind of token and asserts
// the exact allow/deny matrix: 401 without a valid token, 403 without the
// scope, the route's success status with it.
func TestScopeMatrix(t *testing.T) {
	e := newEnv(t, 0)
	art, ct := e.setup()
	fid := str(e.do("POST", "/v1/forget", `{"subject":"zed@example.com"}`), "forget")
	ctx := context.Background()

	mk := func(name string, scopes []string, ttl time.Duration) string {
		_, raw, err := e.tokens.Create(ctx, name, scopes, "", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	tokens := map[string]string{"none": "", "garbage": "shredd_not-a-token"}
	for _, sc := range access.AllScopes {
		tokens[sc] = mk(sc, []string{sc}, 0)
	}
	tokens["expired"] = mk("expired", []string{access.ScopeAdmin}, time.Millisecond)
	rev, raw, err := e.tokens.Create(ctx, "revoked", []string{access.ScopeAdmin}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.tokens.Revoke(ctx, rev.ID); err != nil {
		t.Fatal(err)
	}
	tokens["revoked"] = raw
	time.Sleep(5 * time.Millisecond) // let the short token expire

	env, err := envelope.ParseText(ct)
	if err != nil {
		t.Fatal(err)
	}
	octets := []string{"Content-Type", "application/octet-stream"}
	routes := []struct {
		method, path, body string
		ok                 int
		scopes             []string
		hdr                []string
	}{
		{"GET", "/v1/kinds", "", 200, []string{"encrypt", "decrypt", "register", "audit"}, nil},
		{"PUT", "/v1/kinds/episodic", "", 200, nil, nil},
		{"POST", "/v1/encrypt", `{"subject":"bob@example.com","kind":"episodic","plaintext":""}`, 200, []string{"encrypt"}, nil},
		{"POST", "/v1/decrypt", `{"ciphertext":"` + ct + `"}`, 200, []string{"decrypt"}, nil},
		{"POST", "/v1/encrypt/raw", "raw bytes", 200, []string{"encrypt"}, append([]string{"Shredd-Kind", "episodic", "Shredd-Subject", "bob@example.com", "Shredd-Independent", "true"}, octets...)},
		{"POST", "/v1/decrypt/raw", string(env.Marshal()), 200, []string{"decrypt"}, octets},
		{"POST", "/v1/artifacts", `{"parents":["` + art + `"],"kind":"episodic","holder":"ann-1"}`, 201, []string{"register"}, nil},
		{"GET", "/v1/artifacts/" + art, "", 200, []string{"register", "audit"}, nil},
		{"POST", "/v1/forget", `{"subject":"zed@example.com"}`, 202, []string{"forget"}, nil},
		{"GET", "/v1/forgets", "", 200, []string{"forget", "audit"}, nil},
		{"GET", "/v1/forgets/" + fid, "", 200, []string{"forget", "audit"}, nil},
		// Not erased: the answer shows the call got past the scope check.
		{"GET", "/v1/forgets/" + fid + "/attestation", "", 409, []string{"forget", "audit"}, nil},
		{"GET", "/v1/forgets/" + fid + "/export", "", 409, []string{"forget", "audit"}, nil},
		{"GET", "/v1/log/checkpoint", "", 200, []string{"audit"}, nil},
		{"GET", "/v1/log/key", "", 200, []string{"audit"}, nil},
		{"GET", "/v1/log/tile/entries/000.p/1", "", 200, []string{"audit"}, nil},
		{"GET", "/v1/log/tile/0/000.p/1", "", 200, []string{"audit"}, nil},
		{"GET", "/v1/log/proof/0", "", 200, []string{"audit"}, nil},
		{"GET", "/v1/log/consistency?old=1", "", 200, []string{"audit"}, nil},
		{"POST", "/v1/epoch", "", 200, nil, nil},
	}
	kinds := append([]string{"none", "garbage", "expired", "revoked"}, access.AllScopes...)
	for _, rt := range routes {
		for _, kind := range kinds {
			want := 403
			switch {
			case kind == "none" || kind == "garbage" || kind == "expired" || kind == "revoked":
				want = 401
			case kind == access.ScopeAdmin:
				want = rt.ok
			default:
				for _, sc := range rt.scopes {
					if sc == kind {
						want = rt.ok
					}
				}
			}
			t.Run(fmt.Sprintf("%s %s as %s", rt.method, rt.path, kind), func(t *testing.T) {
				auth := ""
				if tokens[kind] != "" {
					auth = "Bearer " + tokens[kind]
				}
				r := e.do(rt.method, rt.path, rt.body, append([]string{"Authorization", auth}, rt.hdr...)...)
				if r.status != want {
					t.Fatalf("status %d, want %d: %v", r.status, want, r.body)
				}
			})
		}
	}
}

// TestHolderBoundTokens checks that a token bound to a holder acts only as
// that holder: its artifacts get its holder, naming another holder is 403,
// and it cannot read other holders' artifacts.
func TestHolderBoundTokens(t *testing.T) {
	e := newEnv(t, 0)
	art, _ := e.setup()
	ctx := context.Background()
	_, h1, err := e.tokens.Create(ctx, "h1", []string{access.ScopeEncrypt, access.ScopeRegister}, "holder-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	as := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	r := e.do("POST", "/v1/artifacts", `{"parents":["`+art+`"],"kind":"episodic"}`, as(h1)...)
	if r.status != 201 || str(r, "holder") != "holder-1" {
		t.Fatalf("register without a holder: %d %v, want 201 with holder-1", r.status, r.body)
	}
	own := str(r, "artifact")
	if r := e.do("POST", "/v1/artifacts", `{"parents":["`+art+`"],"kind":"episodic","holder":"holder-2"}`, as(h1)...); r.status != 403 || str(r, "code") != "wrong_holder" {
		t.Fatalf("register as another holder: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/v1/encrypt", `{"subject":"a","kind":"episodic","plaintext":"","holder":"holder-2"}`, as(h1)...); r.status != 403 || str(r, "code") != "wrong_holder" {
		t.Fatalf("encrypt as another holder: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/v1/encrypt", `{"batch_input":[{"subject":"a","kind":"episodic","plaintext":"","holder":"holder-2"}]}`, as(h1)...); r.status != 200 {
		t.Fatalf("batch encrypt: %d %v", r.status, r.body)
	} else if res := r.body["batch_results"].([]any)[0].(map[string]any); res["error"] == nil {
		t.Fatalf("batch item as another holder succeeded: %v", res)
	}
	if r := e.do("GET", "/v1/artifacts/"+own, "", as(h1)...); r.status != 200 {
		t.Fatalf("own artifact: %d", r.status)
	}
	if r := e.do("GET", "/v1/artifacts/"+art, "", as(h1)...); r.status != 403 {
		t.Fatalf("another holder's artifact: %d, want 403", r.status)
	}
}
