package vault_test

// Authentication against a real Vault dev server: AppRole login with a
// least-privilege role, and renewal of a short-lived token by
// KeepTokenFresh.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// roundTrip wraps a fresh key and unwraps it again.
func roundTrip(ctx context.Context, s *vault.Root) error {
	k := make([]byte, 32)
	rand.Read(k)
	w, err := s.Wrap(ctx, [][]byte{k})
	if err != nil {
		return err
	}
	got, err := s.Unwrap(ctx, [][]byte{w[0].Blob})
	if err != nil {
		return err
	}
	if !bytes.Equal(got[0], k) {
		return errors.New("unwrap gave another key")
	}
	return nil
}

// putPolicy writes vault.Policy for key under name.
func putPolicy(t *testing.T, c *vaultapi.Client, name, key string) {
	t.Helper()
	if err := c.Sys().PutPolicy(name, vault.Policy("transit", key)); err != nil {
		t.Fatal(err)
	}
}

// appRole enables AppRole auth, creates a role whose tokens hold only
// policy, with the given token settings, and returns its role id and a new
// secret id.
func appRole(t *testing.T, c *vaultapi.Client, role, policy string, tokenSettings map[string]any) (roleID, secretID string) {
	t.Helper()
	if err := c.Sys().EnableAuthWithOptions("approle", &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil {
		t.Fatal(err)
	}
	settings := map[string]any{"token_policies": []string{policy}, "secret_id_ttl": "1h"}
	for k, v := range tokenSettings {
		settings[k] = v
	}
	if _, err := c.Logical().Write("auth/approle/role/"+role, settings); err != nil {
		t.Fatal(err)
	}
	sec, err := c.Logical().Read("auth/approle/role/" + role + "/role-id")
	if err != nil {
		t.Fatal(err)
	}
	roleID, _ = sec.Data["role_id"].(string)
	sec, err = c.Logical().Write("auth/approle/role/"+role+"/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	secretID, _ = sec.Data["secret_id"].(string)
	if roleID == "" || secretID == "" {
		t.Fatalf("role_id %q, secret_id %q", roleID, secretID)
	}
	return roleID, secretID
}

func TestAppRole(t *testing.T) {
	t.Parallel()
	srv := vaulttest.Dev(t)
	ctx := context.Background()
	c := srv.Client("")
	const key, policy, role = "shredd-approle", "shredd-approle", "shredd"
	putPolicy(t, c, policy, key)
	roleID, secretID := appRole(t, c, role, policy, map[string]any{"token_ttl": "1h"})

	cfg := vault.Config{Address: srv.Addr, RoleID: roleID, SecretID: secretID, Key: key}
	s, err := vault.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open with AppRole: %v", err)
	}
	if err := roundTrip(ctx, s); err != nil {
		t.Fatalf("wrap/unwrap with the AppRole token: %v", err)
	}
	if kc := s.KeyConfig(); kc.Name != key || kc.Exportable || kc.LatestVersion != 1 {
		t.Fatalf("key config %+v", kc)
	}
	// The role's token holds only the policy: another key is refused.
	other := cfg
	other.Key = "shredd-other"
	if _, err := vault.Open(ctx, other); !errors.Is(err, keystore.ErrRootUnavailable) {
		t.Fatalf("open another key with the AppRole token: %v, want ErrRootUnavailable (permission denied)", err)
	}

	// Wrong credentials: the store fails closed, with ErrRootUnavailable (a
	// backend that refuses to serve), never with another error a caller
	// might not treat as "fail closed".
	var misclassified []string
	for _, tc := range []struct {
		name string
		cfg  vault.Config
	}{
		{"wrong secret_id", vault.Config{Address: srv.Addr, RoleID: roleID, SecretID: "00000000-0000-0000-0000-000000000000", Key: key}},
		{"wrong role_id", vault.Config{Address: srv.Addr, RoleID: "00000000-0000-0000-0000-000000000000", SecretID: secretID, Key: key}},
		{"wrong mount", vault.Config{Address: srv.Addr, RoleID: roleID, SecretID: secretID, Key: key, AppRoleMount: "no-such-approle"}},
	} {
		bad, err := vault.Open(ctx, tc.cfg)
		if err == nil || bad != nil {
			t.Fatalf("open with %s: store %v, error %v; want no store and an error", tc.name, bad, err)
		}
		if !errors.Is(err, keystore.ErrRootUnavailable) {
			misclassified = append(misclassified, fmt.Sprintf("open with %s: %v", tc.name, err))
		}
		// New does not log in; the first operation does, and fails closed.
		lazy, err := vault.New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := lazy.Wrap(ctx, [][]byte{make([]byte, 32)})
		if err == nil || w != nil {
			t.Fatalf("wrap after a login with %s: %v, %v; want an error", tc.name, w, err)
		}
		if !errors.Is(err, keystore.ErrRootUnavailable) {
			misclassified = append(misclassified, fmt.Sprintf("wrap after a login with %s: %v", tc.name, err))
		}
	}
	t.Run("refused_login_is_ErrRootUnavailable", func(t *testing.T) {
		if len(misclassified) > 0 {
			t.Fatalf("a refused AppRole login is not ErrRootUnavailable (the API must answer 503):\n%s", strings.Join(misclassified, "\n"))
		}
	})
}

// renewableToken creates a renewable token holding only the policy, with a
// short TTL.
func renewableToken(t *testing.T, c *vaultapi.Client, policy string, ttl time.Duration) string {
	t.Helper()
	renewable := true
	sec, err := c.Auth().Token().Create(&vaultapi.TokenCreateRequest{
		Policies: []string{policy}, TTL: ttl.String(), ExplicitMaxTTL: "60s", Renewable: &renewable,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sec.Auth.Renewable || sec.Auth.LeaseDuration != int(ttl.Seconds()) {
		t.Fatalf("token: renewable %v, ttl %ds, want renewable with %v", sec.Auth.Renewable, sec.Auth.LeaseDuration, ttl)
	}
	return sec.Auth.ClientToken
}

// keepFresh runs s.KeepTokenFresh with cfg until the test ends, and returns
// a function that tells what it reported so far.
func keepFresh(t *testing.T, s *vault.Root, cfg vault.Config) (reported func() []error) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.KeepTokenFresh(ctx, cfg, func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(errs)
	}
}

func TestKeepTokenFresh(t *testing.T) {
	t.Parallel()
	srv := vaulttest.Dev(t)
	ctx := context.Background()
	c := srv.Client("")
	const key, policy = "shredd-renew", "shredd-renew"
	putPolicy(t, c, policy, key)
	const ttl = 4 * time.Second

	// The token the store keeps fresh, and a control token of the same kind
	// that nobody renews.
	cfg := vault.Config{Address: srv.Addr, Token: renewableToken(t, c, policy, ttl), Key: key}
	control := vault.Config{Address: srv.Addr, Token: renewableToken(t, c, policy, ttl), Key: key}
	s, err := vault.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := vault.Open(ctx, control)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*vault.Root{s, cs} {
		if err := roundTrip(ctx, st); err != nil {
			t.Fatalf("before expiry: %v", err)
		}
	}

	reported := keepFresh(t, s, cfg)

	time.Sleep(ttl * 5 / 2)
	if err := roundTrip(context.Background(), s); err != nil {
		t.Errorf("after %v with KeepTokenFresh: %v", ttl*5/2, err)
	}
	if err := roundTrip(context.Background(), cs); !errors.Is(err, keystore.ErrRootUnavailable) {
		t.Errorf("control store after %v without renewal: %v, want ErrRootUnavailable (token expired)", ttl*5/2, err)
	}
	// The renewed token's TTL was extended: it has not expired.
	look, err := c.Auth().Token().Lookup(cfg.Token)
	if err != nil {
		t.Fatalf("lookup of the renewed token: %v", err)
	}
	if left, _ := look.TokenTTL(); left <= 0 {
		t.Errorf("renewed token has ttl %v", left)
	}
	for _, err := range reported() {
		t.Errorf("KeepTokenFresh reported: %v", err)
	}
}

// TestKeepTokenFreshAppRoleMaxTTL: an AppRole token cannot be renewed past
// its max TTL; KeepTokenFresh must then log in again with the role, so that
// the store keeps working for longer than the token's max TTL.
func TestKeepTokenFreshAppRoleMaxTTL(t *testing.T) {
	t.Parallel()
	srv := vaulttest.Dev(t)
	ctx := context.Background()
	c := srv.Client("")
	const key, policy = "shredd-approle-maxttl", "shredd-approle-maxttl"
	putPolicy(t, c, policy, key)
	const maxTTL = 4 * time.Second
	roleID, secretID := appRole(t, c, "shredd", policy, map[string]any{"token_ttl": "2s", "token_max_ttl": maxTTL.String()})
	cfg := vault.Config{Address: srv.Addr, RoleID: roleID, SecretID: secretID, Key: key}
	s, err := vault.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reported := keepFresh(t, s, cfg)
	// Work all along, past the first token's max TTL.
	var failures []string
	for end := time.Now().Add(2*maxTTL - time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if err := roundTrip(context.Background(), s); err != nil {
			failures = append(failures, err.Error())
		}
	}
	if err := roundTrip(context.Background(), s); err != nil {
		failures = append(failures, err.Error())
	}
	if len(failures) > 0 {
		t.Fatalf("%d of the round trips within %v failed after the AppRole token reached its max TTL of %v (first: %s); "+
			"KeepTokenFresh reported %d errors: it must log in again before the capped token expires", len(failures), 2*maxTTL, maxTTL,
			failures[0], len(reported()))
	}
}
