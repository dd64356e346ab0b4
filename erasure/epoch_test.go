package erasure_test

import (
	"context"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestEpochCallAnsweredByResume: a POST /v1/epoch that comes while an
// epoch is left running (a crash after its rotation, a Vault failover) and
// waits for the work lock while the background work (or another node)
// completes that epoch is answered by it: no second epoch, no second
// rotation of the root. Before, the waiting call ran a fresh epoch and
// rotated the root once more (TestVaultHAEpoch, now and then).
func TestEpochCallAnsweredByResume(t *testing.T) {
	ctx := context.Background()
	st := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}})
	s := st.Both()
	shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "alice's record")
	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	release := erasure.HoldWork(t, s.Eraser)
	erasure.StartEpoch(t, s.Eraser)
	asked := make(chan struct{})
	erasure.OnEpochAsked(s.Eraser, func() { close(asked) })
	type answer struct {
		e   shredd.Epoch
		err error
	}
	done := make(chan answer, 1)
	go func() {
		e, err := s.RunEpoch(ctx)
		done <- answer{e, err}
	}()
	<-asked // the call read the running epoch; it waits for the work lock
	erasure.OnEpochAsked(s.Eraser, nil)
	resumed, err := erasure.ResumeEpoch(s.Eraser)
	if err != nil {
		t.Fatal(err)
	}
	release()
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.e.ID != resumed.ID || got.e.ToVersion != resumed.ToVersion {
		t.Fatalf("the call answered epoch %d (root %d), want the resumed epoch %d (root %d)", got.e.ID, got.e.ToVersion, resumed.ID, resumed.ToVersion)
	}
	v, err := st.Root.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Latest != 2 {
		t.Fatalf("root at version %d after one epoch, want 2: the waiting call rotated it again", v.Latest)
	}
	// A call with no epoch running runs its own.
	e, err := s.RunEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != resumed.ID+1 || e.ToVersion != 3 {
		t.Fatalf("a call with no epoch running answered epoch %d (root %d), want %d (root 3)", e.ID, e.ToVersion, resumed.ID+1)
	}
	g, err := s.GetForget(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g.State != shredd.StateShredded && g.State != shredd.StateErased {
		t.Fatalf("forget %s after the epochs", g.State)
	}
}
