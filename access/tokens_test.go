package access_test

import (
	"context"
	"testing"
	"time"

	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestTokenStore checks the token store's refusals (unknown scope, no
// scope, malformed holder), the record of a created token, its listing,
// and that a revoked token no longer authenticates.
func TestTokenStore(t *testing.T) {
	tokens := shreddtest.New(t, shreddtest.Options{}).Tokens
	ctx := context.Background()
	if _, _, err := tokens.Create(ctx, "x", []string{"root"}, "", 0); err == nil {
		t.Fatal("unknown scope accepted")
	}
	if _, _, err := tokens.Create(ctx, "x", nil, "", 0); err == nil {
		t.Fatal("token without scopes accepted")
	}
	if _, _, err := tokens.Create(ctx, "x", []string{"encrypt"}, "bad holder", 0); err == nil {
		t.Fatal("bad holder accepted")
	}
	tok, raw, err := tokens.Create(ctx, "writer", []string{"encrypt", "decrypt", "encrypt"}, "agent-7", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tokens.Authenticate(ctx, raw)
	if err != nil || got.ID != tok.ID || got.Holder != "agent-7" || len(got.Scopes) != 2 {
		t.Fatalf("verify: %+v, %v", got, err)
	}
	list, err := tokens.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		if l.ID == tok.ID && l.ExpiresAt.IsZero() {
			t.Fatal("listed token lost its expiry")
		}
	}
	if err := tokens.Revoke(ctx, "nope"); err == nil {
		t.Fatal("revoking an unknown id succeeded")
	}
	if err := tokens.Revoke(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Authenticate(ctx, raw); err == nil {
		t.Fatal("revoked token still verifies")
	}
}
