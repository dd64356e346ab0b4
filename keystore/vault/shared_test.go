package vault_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// TestSharedSecrets keeps a bundle with a token that holds only the
// documented policy: of two nodes keeping theirs at once, one wins and
// both read back the winner's; the bundle is wrapped (the KV secret holds
// a Transit ciphertext, not the bytes).
func TestSharedSecrets(t *testing.T) {
	srv := vaulttest.Dev(t)
	ctx := context.Background()
	key := newKeyName()
	token := policyToken(t, srv, key)
	open := func() *vault.Root {
		s, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: token, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	if _, err := a.Secrets(ctx); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("secrets before any was kept: %v, want ErrNotFound", err)
	}
	var wg sync.WaitGroup
	got := make([][]byte, 2)
	errs := make([]error, 2)
	for i, s := range []*vault.Root{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.KeepSecrets(ctx, []byte{byte('a' + i), 1, 2, 3})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got[0], got[1]) || len(got[0]) != 4 {
		t.Fatalf("the two nodes kept %x and %x: want one bundle for both", got[0], got[1])
	}
	again, err := open().Secrets(ctx)
	if err != nil || !bytes.Equal(again, got[0]) {
		t.Fatalf("read back %x, %v; want %x", again, err, got[0])
	}
	sec, err := srv.Client("").Logical().Read("secret/data/shredd/" + key + "/secrets")
	if err != nil || sec == nil {
		t.Fatalf("read the KV secret: %v", err)
	}
	wrapped, _ := sec.Data["data"].(map[string]any)["wrapped"].(string)
	if len(wrapped) < 10 || wrapped[:6] != "vault:" {
		t.Fatalf("the KV secret holds %q: want a Transit ciphertext", wrapped)
	}
}

// TestForgetRecords writes, lists, reads and drops forget records with
// the policy's token, and refuses names that are not a record's.
func TestForgetRecords(t *testing.T) {
	srv := vaulttest.Dev(t)
	ctx := context.Background()
	key := newKeyName()
	s, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: policyToken(t, srv, key), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if names, err := s.Records(ctx); err != nil || len(names) != 0 {
		t.Fatalf("records of a new key: %v, %v", names, err)
	}
	for _, n := range []string{"0001-aa", "0002-bb"} {
		if err := s.KeepRecord(ctx, n, []byte("record "+n)); err != nil {
			t.Fatal(err)
		}
	}
	names, err := s.Records(ctx)
	if err != nil || !slices.Equal(names, []string{"0001-aa", "0002-bb"}) {
		t.Fatalf("records: %v, %v", names, err)
	}
	if b, err := s.ReadRecord(ctx, "0002-bb"); err != nil || string(b) != "record 0002-bb" {
		t.Fatalf("read: %q, %v", b, err)
	}
	if err := s.DropRecord(ctx, "0001-aa"); err != nil {
		t.Fatal(err)
	}
	if names, _ := s.Records(ctx); !slices.Equal(names, []string{"0002-bb"}) {
		t.Fatalf("records after a drop: %v", names)
	}
	if _, err := s.ReadRecord(ctx, "0001-aa"); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("read a dropped record: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "../x", "ABC", "a/b"} {
		if err := s.KeepRecord(ctx, bad, []byte("x")); err == nil {
			t.Errorf("record name %q accepted", bad)
		}
	}
}
