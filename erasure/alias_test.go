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
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestForgetAlias: an id that migration 0007 merged into another forget of
// its subject (a row of forget_aliases) answers as the kept forget: GET,
// verify, a holder's ack (signed over the kept id; one signed over the
// alias is refused) and the attestation; an id that is neither
// a forget nor an alias stays not found.
func TestForgetAlias(t *testing.T) {
	ctx := context.Background()
	c := shreddtest.NewClock()
	st := shreddtest.New(t, onClock(c, shreddtest.Options{Kinds: []string{"episodic", "embedding"}}))
	s := st.Both()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	if _, _, err := s.RegisterHolder(ctx, "ann-1", pub); err != nil {
		t.Fatal(err)
	}
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "r")
	vec, err := s.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{rec.Artifact}, Holder: "ann-1"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	alias, err := shredd.ParseID("0190000000000000000000000000000b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetForget(ctx, alias); !errors.Is(err, shredd.ErrNotFound) {
		t.Fatalf("GetForget of an unknown id: %v, want ErrNotFound", err)
	}
	if _, err := st.DB.ExecContext(ctx, `INSERT INTO forget_aliases(id, forget) VALUES (?, ?)`, alias[:], f.ID[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute)

	if g, err := s.GetForget(ctx, alias); err != nil || g.ID != f.ID {
		t.Fatalf("GetForget of the alias: %v %v, want forget %s", g.ID, err, f.ID)
	}
	if _, err := s.Ack(ctx, alias, "ann-1", []shredd.ID{vec.ID}, ed25519.Sign(priv, erasure.AckPayload(alias, "ann-1", []shredd.ID{vec.ID}))); !errors.Is(err, shredd.ErrSignature) {
		t.Fatalf("ack to the alias signed over the alias: %v, want ErrSignature (the kept forget's attestation could not carry it)", err)
	}
	if _, err := s.Ack(ctx, alias, "ann-1", []shredd.ID{vec.ID}, ed25519.Sign(priv, erasure.AckPayload(f.ID, "ann-1", []shredd.ID{vec.ID}))); err != nil {
		t.Fatalf("ack to the alias signed over the kept forget: %v", err)
	}
	g, err := s.Verify(ctx, alias)
	if err != nil || g.ID != f.ID || g.State != shredd.StateErased {
		t.Fatalf("Verify of the alias: %s %s %v, want forget %s erased", g.ID, g.State, err, f.ID)
	}
	viaAlias, err := s.Attestation(ctx, alias)
	if err != nil {
		t.Fatal(err)
	}
	viaKept, err := s.Attestation(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(viaAlias) != string(viaKept) {
		t.Fatal("the attestation of the alias is not the kept forget's")
	}
}

// TestLedgerNamesAlias: a forget ledger whose lines name a forget that
// migration 0007 merged into another (its id now an alias) is in step with
// the database: the line counts as present, also when it is the damaged
// (torn) last line, so that the start is neither refused nor commits the
// forget again.
func TestLedgerNamesAlias(t *testing.T) {
	ctx := context.Background()
	w := newLedgerWorld(t)
	carol := w.ids[2]
	kept, err := shredd.ParseID("0190000000000000000000000000000c")
	if err != nil {
		t.Fatal(err)
	}
	// carol's forget as the migration leaves a duplicate: another id kept,
	// the ledger's id an alias of it.
	if _, err := w.b.DB.ExecContext(ctx, `UPDATE forgets SET id=? WHERE id=?`, kept[:], carol[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.b.DB.ExecContext(ctx, `INSERT INTO forget_aliases(id, forget) VALUES (?, ?)`, carol[:], kept[:]); err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(w.raw, []byte("\n"))
	torn := bytes.Join([][]byte{lines[0], lines[1], lines[2], lines[3][:len(lines[3])/2]}, nil)
	_, rep, err := w.reconcile(t, w.b, torn, ledger.Options{})
	if err != nil || rep.Repaired == nil || rep.Repaired.InDB != 1 || len(rep.Repaired.Lost) != 0 || rep.Reapplied != 0 {
		t.Fatalf("torn line naming an alias: %+v %+v, %v; want it counted in the database", rep, rep.Repaired, err)
	}
	_, rep, err = w.reconcile(t, w.b, w.raw, ledger.Options{})
	if err != nil || rep.Reapplied != 0 {
		t.Fatalf("whole ledger naming an alias: %+v, %v; want nothing committed again", rep, err)
	}
	var n int
	if err := w.b.DB.QueryRowContext(ctx, `SELECT count(*) FROM forgets`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d forgets after the starts (%v), want 3", n, err)
	}
}
