package keystore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/testkit/vaulttest"
)

func openPerSubject(t *testing.T, dir string, vs *vault.Root) (*keystore.Tree, *storage.DB) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(dir, "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := keystore.Open(context.Background(), db, vs, keystore.Options{Buckets: 4, SubjectKMS: vs.SubjectKeys()})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// TestPerSubjectTransitKeys runs the key lifecycle and the backup test with
// one Vault Transit key per subject: forget deletes the subject's key in
// Vault, so a copy of the database taken before the forget cannot open the
// subject's key, with no epoch at all.
func TestPerSubjectTransitKeys(t *testing.T) {
	ctx := context.Background()
	srv := vaulttest.Dev(t)
	// Run with a token that holds only the documented policies.
	rootKey := fmt.Sprintf("root-%d", time.Now().UnixNano())
	c := srv.Client("")
	if err := c.Sys().PutPolicy("shredd", vault.Policy("transit", rootKey)+vault.SubjectPolicy("transit")); err != nil {
		t.Fatal(err)
	}
	tok, err := c.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"shredd"}, NoDefaultPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: tok.Auth.ClientToken, Key: rootKey})
	if err != nil {
		t.Fatal(err)
	}
	sk := vs.SubjectKeys()
	live := t.TempDir()
	s, db := openPerSubject(t, live, vs)
	if !s.PerSubject() {
		t.Fatal("store not in per-subject mode")
	}
	alice, bob := sid("alice@example.com"), sid("bob@example.com")
	ka, err := s.Key(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := s.Key(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	aliceKey, bobKey := bytes.Clone(ka.Key), bytes.Clone(kb.Key)
	if ok, err := sk.Exists(ctx, alice); err != nil || !ok {
		t.Fatalf("alice's Transit key missing: %v", err)
	}
	name := sk.Name(alice)
	if bytes.Contains([]byte(name), []byte("alice")) || bytes.Contains([]byte(name), []byte(fmt.Sprintf("%x", alice[:8]))) {
		t.Fatalf("Transit key name %q reveals the subject or its sid", name)
	}
	before := t.TempDir()
	if err := db.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	copyDir(t, live, before)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetTx(ctx, tx, alice); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s.Purge(alice)
	if err := keystore.NewShredder(s).DestroySubject(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := keystore.NewShredder(s).DestroySubject(ctx, alice); err != nil {
		t.Fatalf("destroy is not idempotent: %v", err)
	}
	if ok, err := sk.Exists(ctx, alice); err != nil || ok {
		t.Fatalf("alice's Transit key still exists after forget (err %v)", err)
	}
	if _, err := s.KeyAt(ctx, ka.Ref); !errors.Is(err, keystore.ErrShredded) {
		t.Fatalf("alice after forget: %v, want ErrShredded", err)
	}
	got, err := s.KeyAt(ctx, kb.Ref)
	if err != nil || !bytes.Equal(got.Key, bobKey) {
		t.Fatalf("bob after alice's forget: %v", err)
	}

	// The copy from before the forget still holds alice's wrapped key, but
	// Vault no longer has the key that unwraps it.
	old, _ := openPerSubject(t, before, vs)
	k, err := old.KeyAt(ctx, ka.Ref)
	if err == nil {
		t.Fatalf("backup recovered alice's key (equal: %v)", bytes.Equal(k.Key, aliceKey))
	}
	if !errors.Is(err, keystore.ErrShredded) {
		t.Fatalf("backup: %v, want ErrShredded", err)
	}
	if got, err := old.KeyAt(ctx, kb.Ref); err != nil || !bytes.Equal(got.Key, bobKey) {
		t.Fatalf("backup lost bob's key: %v", err)
	}

	// The mode is fixed when the tree is created.
	root2 := localRoot(t, t.TempDir())
	if _, err := keystore.Open(ctx, db, root2, keystore.Options{Buckets: 4}); err == nil {
		t.Fatal("a per-subject tree opened in tree mode")
	}
}
