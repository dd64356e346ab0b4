package api_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/erasure"
)

// TestListHolders walks GET /v1/holders a page at a time over a real
// server: every holder once, by id, each answer valid against the
// document's HolderList schema; the pending work is the purges route's,
// counted; the last ack appears once the holder acks, the inventory once
// it reports one. An audit token reads it, a holder-bound token sees its
// own holder only, an encrypt token is refused; a bad limit or cursor is
// 400 invalid_request.
func TestListHolders(t *testing.T) {
	e := newEnv(t, 0)
	art, _ := e.setup() // alice's record
	d := loadOpenAPI(t)
	schema, err := d.pointer("#/components/schemas/HolderList")
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(d)
	ids := []string{"ann-1", "bert", "cache-3", "dora.idx", "eve@svc"}
	keys := map[string]ed25519.PrivateKey{}
	for _, id := range ids {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		keys[id] = priv
		if r := e.do("POST", "/v1/holders", `{"holder":"`+id+`","public_key":"`+base64.StdEncoding.EncodeToString(pub)+`"}`); r.status != 201 {
			t.Fatalf("register %s: %d %v", id, r.status, r.body)
		}
	}
	e.do("PUT", "/v1/kinds/embedding", "")
	var vecs []string
	for range 2 {
		r := e.do("POST", "/v1/artifacts", `{"parents":["`+art+`"],"kind":"embedding","holder":"ann-1"}`)
		if r.status != 201 {
			t.Fatalf("register artifact: %d %v", r.status, r.body)
		}
		vecs = append(vecs, str(r, "artifact"))
	}
	fid := str(e.do("POST", "/v1/forget", `{"subject":"alice@example.com"}`), "forget")

	// list walks the listing with limit (0: none) and token (the admin
	// token when ""), and returns the holders by id.
	list := func(limit int, tok string) map[string]map[string]any {
		t.Helper()
		hdr := []string{}
		if tok != "" {
			hdr = []string{"Authorization", "Bearer " + tok}
		}
		out := map[string]map[string]any{}
		var walked []string
		q := url.Values{}
		if limit > 0 {
			q.Set("limit", fmt.Sprint(limit))
		}
		for pages := 1; ; pages++ {
			r := e.do("GET", "/v1/holders?"+q.Encode(), "", hdr...)
			if r.status != 200 {
				t.Fatalf("list: %d %v", r.status, r.body)
			}
			v.check(t, schema, r.body, "GET /v1/holders")
			hs, _ := r.body["holders"].([]any)
			if limit > 0 && len(hs) > limit {
				t.Fatalf("a page of %d with limit=%d", len(hs), limit)
			}
			for _, h := range hs {
				h := h.(map[string]any)
				walked = append(walked, h["holder"].(string))
				out[h["holder"].(string)] = h
			}
			next, ok := r.body["next"].(string)
			if !ok {
				break
			}
			if pages > len(ids) {
				t.Fatal("the pages do not end")
			}
			q.Set("cursor", next)
		}
		if !slices.IsSorted(walked) || len(walked) != len(out) {
			t.Errorf("walked %v: not once each, by id", walked)
		}
		return out
	}
	for _, limit := range []int{0, 1, 2, 5} {
		got := list(limit, "")
		if len(got) != len(ids) {
			t.Fatalf("limit %d: %d holders, want %d", limit, len(got), len(ids))
		}
		for _, id := range ids {
			h := got[id]
			wantArts, wantForgets := 0, 0
			if id == "ann-1" {
				wantArts, wantForgets = 2, 1
			}
			if h["pending_artifacts"] != float64(wantArts) || h["pending_forgets"] != float64(wantForgets) || h["last_ack_at"] != nil || h["inventory"] != nil {
				t.Errorf("limit %d: %s: %v", limit, id, h)
			}
			if _, err := time.Parse(time.RFC3339Nano, h["created_at"].(string)); err != nil {
				t.Errorf("%s: created_at %v", id, h["created_at"])
			}
		}
	}

	// An ack and an inventory.
	fidID, _ := shredd.ParseID(fid)
	v0, _ := shredd.ParseID(vecs[0])
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(keys["ann-1"], erasure.AckPayload(fidID, "ann-1", []shredd.ID{v0})))
	before := time.Now()
	if r := e.do("POST", "/v1/forgets/"+fid+"/acks", `{"holder":"ann-1","artifacts":["`+vecs[0]+`"],"signature":"`+sig+`"}`); r.status != 200 {
		t.Fatalf("ack: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/v1/holders/bert/inventory", `{"artifacts":[{"id":"00000000000000000000000000000000","kind":"embedding"}]}`); r.status != 200 {
		t.Fatalf("inventory: %d %v", r.status, r.body)
	}
	got := list(2, "")
	ann, bert := got["ann-1"], got["bert"]
	acked, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ann["last_ack_at"]))
	if ann["pending_artifacts"] != float64(1) || acked.Before(before.Add(-time.Second)) || acked.After(time.Now()) {
		t.Errorf("ann-1 after its ack: %v", ann)
	}
	purges := e.do("GET", "/v1/holders/ann-1/purges", "")
	if ps, _ := purges.body["purges"].([]any); len(ps) != 1 || len(ps[0].(map[string]any)["artifacts"].([]any)) != 1 {
		t.Errorf("purges of ann-1: %v", purges.body)
	}
	inv, _ := bert["inventory"].(map[string]any)
	if inv == nil || inv["items"] != float64(1) || inv["unknown_artifacts"] != float64(1) || inv["unknown_kinds"] != float64(0) || inv["clean"] != false {
		t.Errorf("bert's inventory: %v", bert)
	}

	// Scopes and holder-bound tokens.
	tok := func(name string, scopes []string, holder string) string {
		_, raw, err := e.tokens.Create(context.Background(), name, scopes, holder, 0)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	if got := list(0, tok("auditor", []string{access.ScopeAudit}, "")); len(got) != len(ids) {
		t.Errorf("audit token: %d holders", len(got))
	}
	if got := list(0, tok("ann", []string{access.ScopeRegister}, "ann-1")); len(got) != 1 || got["ann-1"]["pending_artifacts"] != float64(1) {
		t.Errorf("a token bound to ann-1 sees %v", got)
	}
	if got := list(0, tok("ghost", []string{access.ScopeRegister}, "ghost")); len(got) != 0 {
		t.Errorf("a token bound to an unregistered holder sees %v", got)
	}
	if r := e.do("GET", "/v1/holders", "", "Authorization", "Bearer "+tok("enc", []string{access.ScopeEncrypt}, "")); r.status != 403 {
		t.Errorf("encrypt token: %d", r.status)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=01", "limit=x", "cursor=a", "cursor=" + url.QueryEscape("YW5uLTE="), "cursor=" + shredd.HolderCursor("a b"), "cursor=" + shredd.HolderCursor("-x")} {
		if r := e.do("GET", "/v1/holders?"+q, ""); r.status != 400 || str(r, "code") != "invalid_request" {
			t.Errorf("?%s: %d %v, want 400 invalid_request", q, r.status, r.body)
		}
	}
}
