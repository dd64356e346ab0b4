package vault_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/roottest"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/testkit/vaulttest"
)

var keySeq atomic.Int64

func newKeyName() string { return fmt.Sprintf("shredd-test-%d", keySeq.Add(1)) }

// policyToken returns a token that holds only vault.Policy for the key.
func policyToken(t *testing.T, srv *vaulttest.Server, key string) string {
	t.Helper()
	c := srv.Client("")
	name := "shredd-" + key
	if err := c.Sys().PutPolicy(name, vault.Policy("transit", key)); err != nil {
		t.Fatal(err)
	}
	sec, err := c.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{name}, NoDefaultPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	return sec.Auth.ClientToken
}

func TestConformance(t *testing.T) {
	srv := vaulttest.Dev(t)
	ctx := context.Background()
	for _, mode := range []string{"root-token", "least-privilege-policy"} {
		t.Run(mode, func(t *testing.T) {
			roottest.Run(t, func(t *testing.T) (keystore.RootStore, func() keystore.RootStore) {
				key := newKeyName()
				token := srv.RootToken
				if mode != "root-token" {
					token = policyToken(t, srv, key)
				}
				return openReopen(t, ctx, vault.Config{Address: srv.Addr, Token: token, Key: key})
			})
		})
	}
}

// openReopen opens a store of cfg, and returns it with a function that
// opens it again (a restart), for roottest.Run.
func openReopen(t *testing.T, ctx context.Context, cfg vault.Config) (keystore.RootStore, func() keystore.RootStore) {
	open := func() keystore.RootStore {
		s, err := vault.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return open(), open
}

func TestPolicyDeniesOtherKeys(t *testing.T) {
	srv := vaulttest.Dev(t)
	ctx := context.Background()
	key := newKeyName()
	token := policyToken(t, srv, key)
	if _, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: token, Key: key}); err != nil {
		t.Fatal(err)
	}
	// The same token may not touch another key, nor read or export anything.
	_, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: token, Key: newKeyName()})
	if !errors.Is(err, keystore.ErrRootUnavailable) {
		t.Fatalf("open another key with the policy token: %v, want ErrRootUnavailable (permission denied)", err)
	}
	c := srv.Client(token)
	if _, err := c.Logical().Read("transit/export/encryption-key/" + key); err == nil {
		t.Fatal("policy token can call export")
	}
}

func TestRefusesUnsafeKeyConfig(t *testing.T) {
	srv := vaulttest.Dev(t)
	ctx := context.Background()
	c := srv.Client("")
	for _, opt := range []string{"exportable", "allow_plaintext_backup"} {
		t.Run(opt, func(t *testing.T) {
			key := newKeyName()
			if _, err := c.Logical().Write("transit/keys/"+key, map[string]any{"type": "aes256-gcm96", opt: true, "exportable": true}); err != nil {
				t.Fatal(err)
			}
			_, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: key})
			if !errors.Is(err, vault.ErrUnsafeKey) {
				t.Fatalf("open key with %s: %v, want ErrUnsafeKey", opt, err)
			}
		})
	}
	// A safe key's config is recorded for the attestation.
	key := newKeyName()
	s, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	kc := s.KeyConfig()
	if kc.Name != key || kc.Type != "aes256-gcm96" || kc.Exportable || kc.AllowPlaintextBackup || kc.LatestVersion != 1 {
		t.Fatalf("key config = %+v", kc)
	}
}

// TestErrorMessages pins the one function that reads Vault's error texts
// against this Vault release.
func TestErrorMessages(t *testing.T) {
	srv := vaulttest.Persistent(t)
	ctx := context.Background()
	key := newKeyName()
	s, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	k := make([]byte, 32)
	rand.Read(k)
	old, err := s.Wrap(ctx, [][]byte{k})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Trim(ctx, v); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Unwrap(ctx, [][]byte{old[0].Blob}); !errors.Is(err, keystore.ErrVersionDestroyed) {
		t.Fatalf("trimmed version: %v, want ErrVersionDestroyed", err)
	}
	cur, err := s.Wrap(ctx, [][]byte{k})
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(string(cur[0].Blob))
	b[len(b)-5] ^= 1
	if b[len(b)-5] == '=' || b[len(b)-5] < '0' {
		b[len(b)-5] = 'A'
	}
	if _, err := s.Unwrap(ctx, [][]byte{b}); !errors.Is(err, keystore.ErrCorrupt) {
		t.Fatalf("tampered ciphertext: %v, want ErrCorrupt", err)
	}
	if _, err := s.Unwrap(ctx, [][]byte{[]byte("vault:v999:" + strings.Repeat("A", 40))}); err == nil {
		t.Fatal("future version unwrapped")
	}
	// Denied: a token without the policy.
	denied, err := srv.Client("").Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: denied.Auth.ClientToken, Key: key})
	if !errors.Is(err, keystore.ErrRootUnavailable) || ds != nil {
		t.Fatalf("denied token: %v, want ErrRootUnavailable", err)
	}
	// Sealed.
	srv.Seal()
	if _, err := s.Wrap(ctx, [][]byte{k}); !errors.Is(err, keystore.ErrRootUnavailable) {
		t.Fatalf("sealed: %v, want ErrRootUnavailable", err)
	}
	srv.Unseal()
	// Unreachable.
	srv.Stop()
	if _, err := s.Unwrap(ctx, [][]byte{cur[0].Blob}); !errors.Is(err, keystore.ErrRootUnavailable) {
		t.Fatalf("stopped: %v, want ErrRootUnavailable", err)
	}
	srv.Start()
	got, err := s.Unwrap(ctx, [][]byte{cur[0].Blob})
	if err != nil || string(got[0]) != string(k) {
		t.Fatalf("after restart: %v", err)
	}
}

// TestTLSWithCACert talks to Vault over HTTPS: with the CA file configured
// (--vault-cacert) it works; without it the certificate is refused and the
// store fails closed.
func TestTLSWithCACert(t *testing.T) {
	srv, ca := vaulttest.DevTLS(t)
	ctx := context.Background()
	key := newKeyName()
	s, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: key, CACert: ca})
	if err != nil {
		t.Fatal(err)
	}
	k := make([]byte, 32)
	rand.Read(k)
	w, err := s.Wrap(ctx, [][]byte{k})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Unwrap(ctx, [][]byte{w[0].Blob}); err != nil || string(got[0]) != string(k) {
		t.Fatalf("unwrap over TLS: %v", err)
	}
	if _, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: key}); !errors.Is(err, keystore.ErrRootUnavailable) {
		t.Fatalf("without the CA: %v, want ErrRootUnavailable", err)
	}
}
