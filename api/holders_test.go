package api_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/erasure"
)

// TestHoldersAndAcks drives the holder routes over HTTP: registration, purge
// work, a signed ack (and a forged one), and an inventory that blocks.
func TestHoldersAndAcks(t *testing.T) {
	e := newEnv(t, 0)
	art, _ := e.setup()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	pk := base64.StdEncoding.EncodeToString(pub)
	if r := e.do("POST", "/v1/holders", `{"holder":"ann-1","public_key":"`+pk+`"}`); r.status != 201 {
		t.Fatalf("register holder: %d %v", r.status, r.body)
	}
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	if r := e.do("POST", "/v1/holders", `{"holder":"ann-1","public_key":"`+base64.StdEncoding.EncodeToString(other)+`"}`); r.status != 409 || str(r, "code") != "conflict" {
		t.Fatalf("another key: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/v1/holders", `{"holder":"ann-2","public_key":"AAAA"}`); r.status != 400 {
		t.Fatalf("short key: %d %v", r.status, r.body)
	}
	vec := str(e.do("POST", "/v1/artifacts", `{"parents":["`+art+`"],"kind":"episodic","holder":"ann-1"}`), "artifact")
	fid := str(e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`), "forget")

	r := e.do("GET", "/v1/holders/ann-1/purges", "")
	ps, _ := r.body["purges"].([]any)
	if r.status != 200 || len(ps) != 1 || !strings.Contains(toJSON(ps), vec) {
		t.Fatalf("purges: %d %v", r.status, r.body)
	}
	fidID, _ := shredd.ParseID(fid)
	vecID, _ := shredd.ParseID(vec)
	good := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, erasure.AckPayload(fidID, "ann-1", []shredd.ID{vecID})))
	forged := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, erasure.AckPayload(fidID, "ann-2", []shredd.ID{vecID})))
	if r := e.do("POST", "/v1/forgets/"+fid+"/acks", `{"holder":"ann-1","artifacts":["`+vec+`"],"signature":"`+forged+`"}`); r.status != 400 || str(r, "code") != "invalid_signature" {
		t.Fatalf("forged ack: %d %v", r.status, r.body)
	}
	_, bound, err := e.tokens.Create(context.Background(), "b", []string{access.ScopeRegister}, "ann-2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "/v1/forgets/"+fid+"/acks", `{"holder":"ann-1","artifacts":["`+vec+`"],"signature":"`+good+`"}`, "Authorization", "Bearer "+bound); r.status != 403 {
		t.Fatalf("ack as another holder: %d %v", r.status, r.body)
	}
	if r := e.do("GET", "/v1/holders/ann-1/purges", "", "Authorization", "Bearer "+bound); r.status != 403 {
		t.Fatalf("another holder's purges: %d", r.status)
	}
	r = e.do("POST", "/v1/forgets/"+fid+"/acks", `{"holder":"ann-1","artifacts":["`+vec+`"],"signature":"`+good+`"}`)
	if r.status != 200 || !strings.Contains(toJSON(r.body["closed"]), vec) || len(r.body["missing"].([]any)) != 0 {
		t.Fatalf("ack: %d %v", r.status, r.body)
	}
	if r := e.do("GET", "/v1/holders/ann-1/purges", ""); len(r.body["purges"].([]any)) != 0 {
		t.Fatalf("purge work after the ack: %v", r.body)
	}
	r = e.do("POST", "/v1/holders/ann-1/inventory", `{"artifacts":[{"id":"ffffffffffffffffffffffffffffffff","kind":"kv-cache"}]}`)
	if r.status != 200 || len(r.body["unknown_artifacts"].([]any)) != 1 || len(r.body["unknown_kinds"].([]any)) != 1 {
		t.Fatalf("inventory: %d %v", r.status, r.body)
	}
	if r := e.do("GET", "/v1/forgets/"+fid, ""); str(r, "state") != "blocked" {
		t.Fatalf("forget after a bad inventory: %v", r.body)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestHolderIDsInPaths: a holder id holds ':' and '@' (legal characters);
// its purge work and inventory routes answer for it whether the client
// sends them as they are (Go's url.PathEscape) or percent-encoded
// (JavaScript's encodeURIComponent, Python's quote(safe="")). The segment
// is decoded exactly once: a doubly encoded id is invalid, and an encoded
// '/' or '..' never reaches another route.
func TestHolderIDsInPaths(t *testing.T) {
	e := newEnv(t, 0)
	art, _ := e.setup()
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	const holder = "ops@eu-west:1"
	if r := e.do("POST", "/v1/holders", `{"holder":"`+holder+`","public_key":"`+base64.StdEncoding.EncodeToString(pub)+`"}`); r.status != 201 {
		t.Fatalf("register holder: %d %v", r.status, r.body)
	}
	vec := str(e.do("POST", "/v1/artifacts", `{"parents":["`+art+`"],"kind":"episodic","holder":"`+holder+`"}`), "artifact")
	fid := str(e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`), "forget")
	for _, path := range []string{"ops@eu-west:1", "ops%40eu-west%3A1", "ops%40eu-west:1", "%6Fps@eu-west%3a1"} {
		r := e.do("GET", "/v1/holders/"+path+"/purges", "")
		ps, _ := r.body["purges"].([]any)
		if r.status != 200 || len(ps) != 1 || !strings.Contains(toJSON(ps), vec) || !strings.Contains(toJSON(ps), fid) {
			t.Errorf("GET /v1/holders/%s/purges: %d %v", path, r.status, r.body)
		}
	}
	if r := e.do("POST", "/v1/holders/ops%40eu-west%3A1/inventory", `{"artifacts":[{"id":"`+vec+`","kind":"episodic"}]}`); r.status != 200 || r.body["items"] != float64(1) {
		t.Errorf("inventory by the encoded id: %d %v", r.status, r.body)
	}
	for path, want := range map[string]int{
		"ops%2540eu-west%253A1": 400, // decoded once: "ops%40eu-west%3A1" is no holder id
		"nobody%40here":         404,
		"a%2Fb":                 400, // "a/b": not a holder id, never another route
		"%2E%2E":                400,
		"ops%2Feu-west%3A1":     400,
	} {
		if r := e.do("GET", "/v1/holders/"+path+"/purges", ""); r.status != want {
			t.Errorf("GET /v1/holders/%s/purges: %d, want %d: %v", path, r.status, want, r.body)
		}
	}
}

// TestBlockedForgetNamesItsHolders: the verification of a forget names, in
// a field of its own, the holders it waits on (cascade_closed: those owing
// an ack) and the holders that block it (closure_intact failed: those whose
// inventory holds what shredd never registered), ids with ':' and '@'
// included; the answer stays valid against the document's Forget schema.
func TestBlockedForgetNamesItsHolders(t *testing.T) {
	e := newEnv(t, 0)
	art, _ := e.setup()
	d := loadOpenAPI(t)
	schema, err := d.pointer("#/components/schemas/Forget")
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(d)
	for _, h := range []string{"ann@idx:1", "cache-2", "clean-3"} {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		if r := e.do("POST", "/v1/holders", `{"holder":"`+h+`","public_key":"`+base64.StdEncoding.EncodeToString(pub)+`"}`); r.status != 201 {
			t.Fatalf("register %s: %d %v", h, r.status, r.body)
		}
	}
	e.do("POST", "/v1/artifacts", `{"parents":["`+art+`"],"kind":"episodic","holder":"ann@idx:1"}`)
	fid := str(e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`), "forget")
	cond := func(name string) (status string, holders []string) {
		t.Helper()
		r := e.do("GET", "/v1/forgets/"+fid, "")
		v.check(t, schema, r.body, "GET /v1/forgets/{id}")
		for _, c := range r.body["verification"].([]any) {
			c := c.(map[string]any)
			if c["name"] == name {
				hs, _ := c["holders"].([]any)
				for _, h := range hs {
					holders = append(holders, h.(string))
				}
				return c["status"].(string), holders
			}
		}
		t.Fatalf("no condition %s", name)
		return "", nil
	}
	if st, hs := cond("cascade_closed"); st != "pending" || strings.Join(hs, " ") != "ann@idx:1" {
		t.Errorf("cascade_closed: %s, holders %q, want pending, [ann@idx:1]", st, hs)
	}
	if st, hs := cond("closure_intact"); st != "ok" || hs != nil {
		t.Errorf("closure_intact before any inventory: %s %q", st, hs)
	}
	for _, h := range []string{"cache-2", "ann%40idx%3A1", "clean-3"} {
		items := `[{"id":"ffffffffffffffffffffffffffffffff","kind":"episodic"}]`
		if h == "clean-3" {
			items = `[]`
		}
		if r := e.do("POST", "/v1/holders/"+h+"/inventory", `{"artifacts":`+items+`}`); r.status != 200 {
			t.Fatalf("inventory of %s: %d %v", h, r.status, r.body)
		}
	}
	if r := e.do("GET", "/v1/forgets/"+fid, ""); str(r, "state") != "blocked" {
		t.Fatalf("state %s, want blocked", str(r, "state"))
	}
	if st, hs := cond("closure_intact"); st != "failed" || strings.Join(hs, " ") != "ann@idx:1 cache-2" {
		t.Errorf("closure_intact: %s, holders %q, want failed, [ann@idx:1 cache-2]", st, hs)
	}
}
