package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api/client"
)

// TestHolders lists the holders through the client over a real server:
// pages of one and AllHolders give every holder once, by id; the pending
// work is Purges' count and drops to 0 once the holder kit purged and
// acked, which sets LastAckAt; an audit token reads the listing, a
// holder-bound token sees its own holder only; a bad limit is a 400.
func TestHolders(t *testing.T) {
	s, admin := serverWithKinds(t, "episodic", "embedding")
	ctx := t.Context()
	ids := []string{"ann-1", "bert", "cache-3"}
	kit := map[string]*client.Holder{}
	for _, id := range ids {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		h, err := client.NewHolder(admin, id, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Register(ctx, admin); err != nil {
			t.Fatal(err)
		}
		kit[id] = h
	}
	rec, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice"}, Kind: "episodic", Plaintext: []byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	vec, err := admin.Register(ctx, client.RegisterRequest{Parents: []string{rec.Artifact}, Kind: "embedding", Holder: "ann-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Forget(ctx, "alice"); err != nil {
		t.Fatal(err)
	}

	var walked []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > len(ids) {
			t.Fatal("the pages do not end")
		}
		p, err := admin.Holders(ctx, 1, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Holders) != 1 {
			t.Fatalf("a page of %d with limit 1", len(p.Holders))
		}
		walked = append(walked, p.Holders[0].Holder)
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	if !slices.Equal(walked, ids) {
		t.Fatalf("walked %v, want %v", walked, ids)
	}
	pending := func(c *client.Client) map[string]client.HolderStatus {
		t.Helper()
		all, err := c.AllHolders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]client.HolderStatus{}
		for _, h := range all {
			out[h.Holder] = h
		}
		return out
	}
	all := pending(s.client(s.token(access.ScopeAudit)))
	if len(all) != 3 || all["ann-1"].PendingArtifacts != 1 || all["ann-1"].PendingForgets != 1 || all["bert"].PendingArtifacts != 0 || all["ann-1"].LastAckAt != nil || all["ann-1"].Inventory != nil {
		t.Fatalf("before the purge: %+v", all)
	}
	if work, err := admin.Purges(ctx, "ann-1"); err != nil || len(work) != 1 || !slices.Equal(work[0].Artifacts, []string{vec.ID}) {
		t.Fatalf("purges: %+v %v", work, err)
	}

	before := time.Now()
	round, err := kit["ann-1"].PurgeOnce(ctx, func(_ context.Context, _ string, arts []string) ([]string, error) { return arts, nil })
	if err != nil || len(round.Errors) != 0 || len(round.Acked) != 1 {
		t.Fatalf("purge: %+v %v", round, err)
	}
	if _, err := kit["ann-1"].ReportInventory(ctx, nil); err != nil {
		t.Fatal(err)
	}
	all = pending(admin)
	ann := all["ann-1"]
	if ann.PendingArtifacts != 0 || ann.PendingForgets != 0 || ann.LastAckAt == nil || ann.LastAckAt.Before(before.Add(-time.Second)) || ann.Inventory == nil || !ann.Inventory.Clean || ann.Inventory.Items != 0 {
		t.Fatalf("after the purge: %+v (inventory %+v)", ann, ann.Inventory)
	}

	_, bound, err := s.tokens.Create(ctx, "ann", []string{access.ScopeRegister}, "ann-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if own := pending(s.client(bound)); len(own) != 1 || own["ann-1"].Holder != "ann-1" {
		t.Fatalf("a token bound to ann-1 sees %+v", own)
	}
	if _, err := s.client(s.token(access.ScopeEncrypt)).Holders(ctx, 0, ""); err == nil {
		t.Fatal("an encrypt token lists the holders")
	} else {
		wantError(t, err, 403, "forbidden")
	}
	if _, err := admin.Holders(ctx, client.MaxHolderPage+1, ""); err == nil {
		t.Fatal("a limit over the most is accepted")
	} else {
		wantError(t, err, 400, "invalid_request")
	}
}
