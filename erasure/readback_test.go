package erasure_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// plantIgnore plants, in the live database, a trigger that silently skips
// every update of column col of table (the attack of a restored backup
// that carries one), and returns the function that drops it.
func plantIgnore(t *testing.T, db *storage.DB, table, col string) func() {
	t.Helper()
	return plantIgnoreSID(t, db, table, col, nil)
}

// plantIgnoreSID is plantIgnore for the rows of one subject only (sid), or
// of every row (nil).
func plantIgnoreSID(t *testing.T, db *storage.DB, table, col string, sid []byte) func() {
	t.Helper()
	ctx := context.Background()
	name := "keep_" + table
	when := ""
	if sid != nil {
		when = fmt.Sprintf(" WHEN old.sid = X'%x'", sid)
	}
	stmts := []string{`CREATE TRIGGER ` + name + ` BEFORE UPDATE OF ` + col + ` ON ` + table + when + ` BEGIN SELECT RAISE(IGNORE); END`}
	drop := []string{`DROP TRIGGER ` + name}
	if db.Shared() { // PostgreSQL: a BEFORE row trigger that returns NULL skips the row
		if sid != nil {
			when = fmt.Sprintf(` WHEN (OLD.sid = '\x%x'::bytea)`, sid)
		}
		stmts = []string{
			`CREATE OR REPLACE FUNCTION shredd_test_ignore() RETURNS trigger AS $$ BEGIN RETURN NULL; END $$ LANGUAGE plpgsql`,
			`CREATE TRIGGER ` + name + ` BEFORE UPDATE OF ` + col + ` ON ` + table + ` FOR EACH ROW` + when + ` EXECUTE FUNCTION shredd_test_ignore()`,
		}
		drop = []string{`DROP TRIGGER ` + name + ` ON ` + table}
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("plant %s: %v", q, err)
		}
	}
	return func() {
		for _, q := range drop {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("drop %s: %v", q, err)
			}
		}
	}
}

// TestReadBackStallsForget: a database that ignores the deletion of a
// subject key (route 2 of the integrity issue: a planted trigger) must
// make the forget stall, requested, with the reason, never committed,
// shredded or erased while the data opens; once the fault is gone the
// same forget commits. A repeated forget answers the same forget with the
// salt of the first answer.
func TestReadBackStallsForget(t *testing.T) {
	ctx := context.Background()
	c := shreddtest.NewClock()
	st := shreddtest.New(t, onClock(c, shreddtest.Options{Kinds: []string{"episodic"}}))
	s := st.Both()
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "alice record")
	drop := plantIgnore(t, st.DB, "subjects", "wrapped")

	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if f.State != shredd.StateRequested || !f.CommittedAt.IsZero() {
		t.Fatalf("with the key deletion ignored, the forget is %s (committed %v), want requested", f.State, f.CommittedAt)
	}
	var kd shredd.Condition
	for _, cond := range f.Conditions {
		if cond.Name == "key_destroyed" {
			kd = cond
		}
	}
	if kd.Status != "pending" || !strings.Contains(kd.Reason, "read back") {
		t.Fatalf("key_destroyed is %s (%q), want pending with the read-back's reason", kd.Status, kd.Reason)
	}
	if len(f.Salt) == 0 {
		t.Fatal("the first answer carries no commitment salt")
	}
	// Nothing claimed, and nothing hidden: the data still opens, as the
	// forget's state says.
	if _, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{Holder: "w"}); err != nil {
		t.Fatalf("decrypt while the forget is stalled: %v", err)
	}
	if err := s.Reconcile(ctx); err != nil {
		t.Fatalf("a stalled forget must not stop the background work: %v", err)
	}
	if g, _ := s.GetForget(ctx, f.ID); g.State != shredd.StateRequested {
		t.Fatalf("after a reconcile with the fault in place: %s", g.State)
	}

	drop()
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := s.GetForget(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g.State != shredd.StateCommitted {
		t.Fatalf("fault gone: the forget is %s, want committed", g.State)
	}
	if _, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{Holder: "w"}); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("decrypt after the commit: %v, want ErrShredded", err)
	}
	again, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != f.ID || !bytes.Equal(again.Salt, f.Salt) {
		t.Fatalf("repeated forget: id %s salt %x, want %s with the first answer's salt %x", again.ID, again.Salt, f.ID, f.Salt)
	}
}

// TestReadBackStallsShredded: a database that ignores the bucket key's
// re-wrap keeps the forget from being claimed shredded (or erased): the
// read-back finds the bucket key under a root version the epoch was to
// retire.
func TestReadBackStallsShredded(t *testing.T) {
	ctx := context.Background()
	c := shreddtest.NewClock()
	st := shreddtest.New(t, onClock(c, shreddtest.Options{Kinds: []string{"episodic"}}))
	s := st.Both()
	shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, "bob record")
	f, err := s.Forget(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if st.Keys.PerSubject() {
		t.Fatal("this test needs the key tree")
	}
	plantIgnore(t, st.DB, "buckets", "wrapped")
	_ = s.Reconcile(ctx)
	_, _ = s.RunEpoch(ctx) // may fail or complete: the claim is what is checked
	_ = s.Reconcile(ctx)
	c.Add(time.Hour)
	g, err := s.Verify(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g.State == shredd.StateShredded || g.State == shredd.StateErased || !g.ShreddedAt.IsZero() {
		t.Fatalf("with the bucket re-wrap ignored the forget is %s: a claim the store does not hold", g.State)
	}
	var er shredd.Condition
	for _, cond := range g.Conditions {
		if cond.Name == "epoch_rotated" {
			er = cond
		}
	}
	if er.Status != "pending" {
		t.Fatalf("epoch_rotated is %s (%q), want pending", er.Status, er.Reason)
	}
	if _, err := s.Attestation(ctx, f.ID); !errors.Is(err, shredd.ErrNotErased) {
		t.Fatalf("attestation of a stalled forget: %v, want ErrNotErased", err)
	}
}
