package erasure_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/testkit/shreddtest"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// TestPerSubjectStory runs the lineage story with one Vault Transit key per
// subject: the forget is shredded as soon as the subject's Transit key is
// deleted, without an epoch, and derivatives and aggregates are refused.
func TestPerSubjectStory(t *testing.T) {
	ctx := context.Background()
	srv := vaulttest.Dev(t)
	vs, err := vault.Open(ctx, vault.Config{Address: srv.Addr, Token: srv.RootToken, Key: fmt.Sprintf("root-%d", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	st := shreddtest.New(t, shreddtest.Options{Root: vs, Keystore: keystore.Options{Buckets: 4, SubjectKMS: vs.SubjectKeys()},
		Kinds: []string{"episodic", "summary"}})
	s, h := st.Both(), st.Hasher
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "alice record")
	bob := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, "bob record")
	sum := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Parents: []shredd.ID{rec.Artifact}, Subjects: []string{"bob"}}, "summary")
	agg := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Subjects: []string{"alice", "bob", "carol"}}, "aggregate")

	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]shredd.Sealed{"record": rec, "summary": sum, "aggregate": agg} {
		if _, err := s.Decrypt(ctx, c.Ciphertext, nil); !errors.Is(err, shredd.ErrShredded) {
			t.Errorf("%s after forget: %v, want ErrShredded", name, err)
		}
	}
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	f, err = s.GetForget(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.State != shredd.StateShredded || f.Epoch != 0 {
		t.Fatalf("forget after reconcile = %+v, want shredded without an epoch", f)
	}
	if len(f.Conditions) != 2 || f.Conditions[1].Name != "subject_key_deleted" || f.Conditions[1].Status != "ok" {
		t.Fatalf("conditions = %+v", f.Conditions)
	}
	if ok, err := vs.SubjectKeys().Exists(ctx, h.SID("alice")); err != nil || ok {
		t.Fatalf("alice's Transit key exists after the forget (err %v)", err)
	}
	if got, err := s.Decrypt(ctx, bob.Ciphertext, nil); err != nil || string(got.Plaintext) != "bob record" {
		t.Fatalf("bob: %v", err)
	}
	if _, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, []byte("x"), nil); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("encrypt for alice after forget: %v", err)
	}
}
