package erasure_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestReconcileCountsOnlyReapplied: a ledger forget whose subject the
// database already forgot by itself (another forget id, made after a
// restore) is left as it is and not counted as re-applied; only the
// forgets committed again are ("reapplied N" in the start's log).
func TestReconcileCountsOnlyReapplied(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "forgets.ledger")
	l := openLedger(t, path, ledger.Options{})
	a := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}, Erasure: erasure.Options{Ledger: l}})
	for _, s := range []string{"alice", "bob"} {
		if _, err := a.Service.Forget(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()

	// Another database that forgot alice by itself, not bob.
	b := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}})
	if _, err := b.Service.Forget(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	svc := erasure.New(b.DB, b.Registry, b.Keys, b.Hasher, erasure.Options{Ledger: openLedger(t, path, ledger.Options{})})
	rep, err := svc.Recovery().ReconcileLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reapplied != 1 || rep.Recorded != 1 {
		t.Fatalf("reconcile: %+v; want 1 re-applied (bob's) and 1 recorded (the database's own forget of alice)", rep)
	}
}
