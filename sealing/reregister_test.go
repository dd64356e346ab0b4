package sealing_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// unregister deletes an artifact's rows from the registry of a real
// database, as a restore of a backup taken before it was sealed leaves it.
func unregister(t *testing.T, st *shreddtest.Stack, id shredd.ID) {
	t.Helper()
	// Into the tables first (the registration WAL folds in the background).
	if err := st.Registry.Fold(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM artifacts WHERE id=?`, `DELETE FROM lineage WHERE artifact=?`, `DELETE FROM lineage_staged WHERE artifact=?`} {
		if _, err := st.DB.ExecContext(context.Background(), q, id[:]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnknownArtifactFailsClosed checks that an authentic envelope whose
// artifact the registry lost opens neither in text nor in binary form
// (ErrUnknownArtifact, no lease), and that Reregister brings it back from
// the envelope alone: once, idempotently, refusing tampered envelopes,
// the wrong context and forgotten subjects.
func TestUnknownArtifactFailsClosed(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}})
	s := st.Both()
	ctxA := []byte("tenant=a")
	seal := func(subjects ...string) shredd.Sealed {
		out, err := s.Encrypt(ctx, shredd.Source{Kind: "episodic", Subjects: subjects}, []byte("data"), ctxA)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	rec, pair, carol := seal("alice"), seal("alice", "bob"), seal("carol")
	for _, c := range []shredd.Sealed{rec, pair, carol} {
		unregister(t, st, c.Artifact)
	}
	if _, err := s.Decrypt(ctx, rec.Ciphertext, ctxA); !errors.Is(err, shredd.ErrUnknownArtifact) {
		t.Fatalf("decrypt of an unregistered artifact: %v, want ErrUnknownArtifact", err)
	}
	bin, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(rec.Ciphertext, envelope.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecryptBinary(ctx, bin, ctxA, shredd.Reader{}); !errors.Is(err, shredd.ErrUnknownArtifact) {
		t.Fatalf("binary decrypt of an unregistered artifact: %v, want ErrUnknownArtifact", err)
	}
	if _, err := s.Forget(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte(nil), bin...)
	tampered[6] ^= 1 // the header's artifact id
	out, errs := s.Reregister(ctx, []shredd.ReregisterInput{
		{Ciphertext: rec.Ciphertext, Context: ctxA, Holder: "store-1"},
		{Binary: tampered, Context: ctxA},
		{Ciphertext: pair.Ciphertext, Context: []byte("tenant=b")},
		{Ciphertext: carol.Ciphertext, Context: ctxA},
		{Ciphertext: pair.Ciphertext, Context: ctxA},
		{Ciphertext: rec.Ciphertext, Context: ctxA}, // twice in one batch
	})
	wantErr := []error{nil, shredd.ErrEnvelope, shredd.ErrEnvelope, shredd.ErrShredded, nil, nil}
	wantKnown := []bool{false, false, false, false, false, true}
	for i := range wantErr {
		if (wantErr[i] == nil) != (errs[i] == nil) || (wantErr[i] != nil && !errors.Is(errs[i], wantErr[i])) {
			t.Fatalf("item %d: %v, want %v", i, errs[i], wantErr[i])
		}
		if errs[i] == nil && out[i].Known != wantKnown[i] {
			t.Fatalf("item %d: %+v, want known %v", i, out[i], wantKnown[i])
		}
	}
	if out[0].Artifact != rec.Artifact || out[4].Artifact != pair.Artifact || out[4].Lineage != 2 || out[0].Kind != "episodic" {
		t.Fatalf("results %+v", out)
	}
	a, err := s.GetArtifact(ctx, rec.Artifact)
	if err != nil || a.Holder != "store-1" || !a.Sealed || a.Lineage != 1 {
		t.Fatalf("re-registered artifact %+v: %v", a, err)
	}
	for _, c := range []shredd.Sealed{rec, pair} {
		if got, err := s.Decrypt(ctx, c.Ciphertext, ctxA); err != nil || string(got.Plaintext) != "data" {
			t.Fatalf("decrypt after reregister: %v", err)
		}
	}
	if _, err := s.Decrypt(ctx, carol.Ciphertext, ctxA); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("decrypt of a forgotten subject's envelope: %v, want ErrShredded", err)
	}
	out, errs = s.Reregister(ctx, []shredd.ReregisterInput{{Ciphertext: pair.Ciphertext, Context: ctxA}})
	if errs[0] != nil || !out[0].Known {
		t.Fatalf("again: %+v %v, want known", out[0], errs[0])
	}
	// The forget of bob reaches the re-registered aggregate.
	p, err := s.Preview(ctx, "bob")
	if err != nil || p.Total != 1 || p.Artifacts[0].ID != pair.Artifact {
		t.Fatalf("preview of bob: %+v %v", p, err)
	}
}
