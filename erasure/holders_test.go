package erasure_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/testkeys"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestHolderAcks: a plaintext-held artifact is closed only by its holder's
// signed ack that names it; bad signatures, other holders' artifacts and
// unknown artifacts are refused, and an ack that omits an artifact leaves it
// open. An inventory with unregistered artifacts blocks the forget.
func TestHolderAcks(t *testing.T) {
	ctx := context.Background()
	s, c := newClockedService(t)
	pubA, privA, _ := ed25519.GenerateKey(rand.Reader)
	pubB, privB, _ := ed25519.GenerateKey(rand.Reader)
	if _, created, err := s.RegisterHolder(ctx, "ann-1", pubA); err != nil || !created {
		t.Fatalf("register: %v %v", created, err)
	}
	if _, created, err := s.RegisterHolder(ctx, "ann-1", pubA); err != nil || created {
		t.Fatalf("register again: %v %v", created, err)
	}
	if _, _, err := s.RegisterHolder(ctx, "ann-1", pubB); !errors.Is(err, shredd.ErrConflict) {
		t.Fatalf("another key for a holder: %v", err)
	}
	if _, _, err := s.RegisterHolder(ctx, "cache-2", pubB); err != nil {
		t.Fatal(err)
	}
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "r")
	v1, _ := s.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{rec.Artifact}, Holder: "ann-1"})
	v2, _ := s.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{rec.Artifact}, Holder: "ann-1"})
	kv, _ := s.Register(ctx, shredd.Source{Kind: "summary", Subjects: []string{"alice"}, Holder: "cache-2"})
	f := forgetThroughEpoch(t, s, c, "alice", time.Minute)

	work, err := s.Purges(ctx, "ann-1")
	if err != nil || len(work) != 1 || work[0].Forget != f.ID || len(work[0].Artifacts) != 2 {
		t.Fatalf("purge work: %+v %v", work, err)
	}
	sign := func(priv ed25519.PrivateKey, holder string, ids ...shredd.ID) []byte {
		return ed25519.Sign(priv, erasure.AckPayload(f.ID, holder, ids))
	}
	if _, err := s.Ack(ctx, f.ID, "ann-1", []shredd.ID{v1.ID, v2.ID}, sign(privB, "ann-1", v1.ID, v2.ID)); !errors.Is(err, shredd.ErrSignature) {
		t.Fatalf("ack signed with another key: %v", err)
	}
	if _, err := s.Ack(ctx, f.ID, "ann-1", []shredd.ID{v1.ID}, sign(privA, "ann-1", v1.ID, v2.ID)); !errors.Is(err, shredd.ErrSignature) {
		t.Fatalf("ack whose signature covers other artifacts: %v", err)
	}
	if _, err := s.Ack(ctx, f.ID, "ann-1", []shredd.ID{kv.ID}, sign(privA, "ann-1", kv.ID)); !errors.Is(err, shredd.ErrForbidden) {
		t.Fatalf("ack of another holder's artifact: %v", err)
	}
	if _, err := s.Ack(ctx, f.ID, "ann-1", []shredd.ID{rec.Artifact}, sign(privA, "ann-1", rec.Artifact)); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("ack of a sealed artifact: %v", err)
	}
	// "Deleted", naming only one of the two vectors: the other stays open.
	res, err := s.Ack(ctx, f.ID, "ann-1", []shredd.ID{v1.ID}, sign(privA, "ann-1", v1.ID))
	if err != nil || len(res.Missing) != 1 || res.Missing[0] != v2.ID {
		t.Fatalf("partial ack: %+v %v", res, err)
	}
	if g := mustVerify(t, s, f.ID); g.State == shredd.StateErased || conditions(g)[shredd.CondCascadeClosed].Status != "pending" {
		t.Fatalf("erased with unacked artifacts: %s %+v", g.State, conditions(g))
	}
	if _, err := s.Ack(ctx, f.ID, "ann-1", []shredd.ID{v2.ID}, sign(privA, "ann-1", v2.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ack(ctx, f.ID, "cache-2", []shredd.ID{kv.ID}, sign(privB, "cache-2", kv.ID)); err != nil {
		t.Fatal(err)
	}
	if work, _ := s.Purges(ctx, "ann-1"); len(work) != 0 {
		t.Fatalf("purge work left after the acks: %+v", work)
	}

	// An inventory holding something shredd never registered blocks it.
	if _, err := s.ReportInventory(ctx, "cache-2", []shredd.InventoryItem{{ID: kv.ID.String(), Kind: "summary"}, {ID: "ffffffffffffffffffffffffffffffff", Kind: "kv-cache"}}); err != nil {
		t.Fatal(err)
	}
	g := mustVerify(t, s, f.ID)
	if g.State != shredd.StateBlocked || conditions(g)[shredd.CondClosureIntact].Status != "failed" {
		t.Fatalf("inventory with unregistered artifacts: %s %+v", g.State, conditions(g))
	}
	if _, err := s.ReportInventory(ctx, "cache-2", nil); err != nil {
		t.Fatal(err)
	}
	if g := mustVerify(t, s, f.ID); g.State != shredd.StateErased {
		t.Fatalf("all closed and the inventory clean, yet %s: %+v", g.State, conditions(g))
	}

	// The attestation: signed, about the salted commitment, listing every
	// artifact with how it was closed and both holders' acks.
	svcPub := testkeys.AttestationKey(0).Public().(ed25519.PublicKey) // the stack's signer's
	raw, err := s.Attestation(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.Open(raw, svcPub)
	if err != nil {
		t.Fatalf("the attestation does not verify: %v", err)
	}
	if len(f.Salt) == 0 {
		t.Fatal("the forget's first answer carried no commitment salt")
	}
	if err := st.CheckSubject("alice", f.Salt); err != nil {
		t.Fatal(err)
	}
	if st.CheckSubject("bob", f.Salt) == nil {
		t.Fatal("the commitment matches another subject")
	}
	if bytes.Contains(raw, []byte("alice")) {
		t.Fatal("the attestation names the subject")
	}
	p := st.Predicate
	if p.Claim != "cryptographically erased" || len(p.Artifacts) != 4 || len(p.HolderAcks) != 3 || p.KeyEvidence.Epoch != 1 {
		t.Fatalf("predicate: %+v", p)
	}
	// A repeated forget (the first answer lost on its way) hands its
	// caller, who names the subject again, the salt of the first answer.
	if again, _ := s.Forget(ctx, "alice"); !bytes.Equal(again.Salt, f.Salt) {
		t.Fatalf("a repeated forget answered salt %x, want the first answer's %x", again.Salt, f.Salt)
	}

	// The holder still lists a vector it acked as purged: its ack was false.
	// The erased forget keeps its proof and attestation (they state the
	// evidence at erasure); the report names the contradiction, and it
	// blocks forgets still open.
	bob := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, "b")
	if _, err := s.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{bob.Artifact}, Holder: "ann-1"}); err != nil {
		t.Fatal(err)
	}
	fb, err := s.Forget(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := s.ReportInventory(ctx, "ann-1", []shredd.InventoryItem{{ID: v1.ID.String(), Kind: "embedding"}})
	if err != nil || len(inv.ContradictedAcks) != 1 || inv.ContradictedAcks[0] != v1.ID.String() {
		t.Fatalf("inventory holding an acked artifact: %+v %v", inv, err)
	}
	if g := mustVerify(t, s, fb.ID); g.State != shredd.StateBlocked {
		t.Fatalf("open forget after a false ack came to light: %s", g.State)
	}
	if g, _ := s.GetForget(ctx, f.ID); g.State != shredd.StateErased || conditions(g)[shredd.CondClosureIntact].Status != "ok" {
		t.Fatalf("the erased forget's proof changed: %s %+v", g.State, conditions(g))
	}
	if _, err := s.Attestation(ctx, f.ID); err != nil {
		t.Fatalf("the attestation of an erased forget went away: %v", err)
	}
}

func TestNoAttestationBeforeErasure(t *testing.T) {
	ctx := context.Background()
	s, _ := newClockedService(t)
	shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "r")
	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Attestation(ctx, f.ID); !errors.Is(err, shredd.ErrNotErased) {
		t.Fatalf("attestation of a committed forget: %v, want ErrNotErased", err)
	}
}
