package erasure_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// onClock returns o with c as the clock of the key tree, the registry and
// the journal, a 30s key cache, 5 min leases and forgets due within an hour.
func onClock(c *shreddtest.Clock, o shreddtest.Options) shreddtest.Options {
	o.Now = c.Now
	o.Keystore.CacheTTL = 30 * time.Second
	o.Registry.LeaseTTL, o.Erasure.Deadline = 5*time.Minute, time.Hour
	return o
}

func newClockedService(t testing.TB) (*shreddtest.Service, *shreddtest.Clock) {
	t.Helper()
	c := shreddtest.NewClock()
	return shreddtest.New(t, onClock(c, shreddtest.Options{Kinds: []string{"episodic", "summary", "embedding"}})).Both(), c
}

func conditions(f shredd.Forget) map[string]shredd.Condition {
	m := map[string]shredd.Condition{}
	for _, c := range f.Verification {
		m[c.Name] = c
	}
	return m
}

// forgetThroughEpoch forgets subject, runs an epoch and moves the clock on
// by d: the forget's key is destroyed, its verification now due.
func forgetThroughEpoch(t *testing.T, s *shreddtest.Service, c *shreddtest.Clock, subject string, d time.Duration) shredd.Forget {
	t.Helper()
	ctx := context.Background()
	f, err := s.Forget(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	c.Add(d)
	return f
}

func mustVerify(t *testing.T, s *shreddtest.Service, id shredd.ID) shredd.Forget {
	t.Helper()
	f, err := s.Verify(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestVerifierErasesOnlyWhenEveryConditionHolds walks a forget through its
// conditions: a lease issued before the barrier, the epoch, the cache TTL.
// It is erased only once all five hold.
func TestVerifierErasesOnlyWhenEveryConditionHolds(t *testing.T) {
	ctx := context.Background()
	s, c := newClockedService(t)
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "alice record")
	shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Parents: []shredd.ID{rec.Artifact}, Subjects: []string{"bob"}}, "summary")
	o, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{Holder: "summarizer-1"}) // a worker loads the record
	if err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	// And a token's read, released at once: attributable until it expires.
	tok, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{Token: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReleaseLease(ctx, tok.Lease.ID, ""); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	conds := conditions(mustVerify(t, s, f.ID))
	if len(conds) != 5 {
		t.Fatalf("%d conditions, want the five of docs/design.md: %+v", len(conds), conds)
	}
	for name, want := range map[string]string{
		shredd.CondCascadeClosed: "ok", shredd.CondWorkersQuiesced: "pending",
		shredd.CondReadPathConverged: "pending", shredd.CondClosureIntact: "ok", shredd.CondBackupsEpoch: "pending",
	} {
		if conds[name].Status != want {
			t.Errorf("after commit: %s is %s (%s), want %s", name, conds[name].Status, conds[name].Reason, want)
		}
	}
	if _, err := s.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute) // past the cache TTL, not past the lease
	f = mustVerify(t, s, f.ID)
	if f.State != shredd.StateShredded || conditions(f)[shredd.CondWorkersQuiesced].Status != "pending" {
		t.Fatalf("a live pre-barrier lease must keep the forget pending: %s %+v", f.State, conditions(f))
	}
	if _, err := s.ReleaseLease(ctx, o.Lease.ID, "summarizer-1"); err != nil {
		t.Fatal(err)
	}
	f = mustVerify(t, s, f.ID)
	if f.State != shredd.StateErased || f.ErasedAt.IsZero() {
		t.Fatalf("every condition holds, yet the forget is %s: %+v", f.State, conditions(f))
	}
	for name, cond := range conditions(f) {
		if cond.Status != "ok" {
			t.Errorf("erased with %s %s", name, cond.Status)
		}
	}
	if list, _ := s.Forgets(ctx, shredd.StateErased, 0); len(list) != 1 {
		t.Fatalf("list erased: %d", len(list))
	}
}

// TestVerifierPendingAndOverdue: a plaintext-held artifact without a purge
// ack keeps the forget pending, with the holder named, and the deadline
// makes it overdue; a lease expiring on its own also quiesces.
func TestVerifierPendingAndOverdue(t *testing.T) {
	ctx := context.Background()
	s, c := newClockedService(t)
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "r")
	if _, err := s.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{rec.Artifact}, Holder: "ann-index-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{Holder: "w"}); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	f := forgetThroughEpoch(t, s, c, "alice", 6*time.Minute) // the lease expired by itself; the TTL passed
	f = mustVerify(t, s, f.ID)
	conds := conditions(f)
	if conds[shredd.CondWorkersQuiesced].Status != "ok" || conds[shredd.CondReadPathConverged].Status != "ok" {
		t.Fatalf("expired lease / TTL: %+v", conds)
	}
	if cc := conds[shredd.CondCascadeClosed]; cc.Status != "pending" || !bytes.Contains([]byte(cc.Reason), []byte("ann-index-1")) {
		t.Fatalf("a plaintext-held artifact without an ack: %+v", cc)
	}
	if f.State == shredd.StateErased {
		t.Fatal("erased with an unacknowledged plaintext-held artifact")
	}
	c.Add(2 * time.Hour)
	if f = mustVerify(t, s, f.ID); f.State != shredd.StateOverdue || !f.Overdue {
		t.Fatalf("past the deadline: %s, overdue %v", f.State, f.Overdue)
	}
	// The holder acks late: erased, and still marked overdue.
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	if _, _, err := s.RegisterHolder(ctx, "ann-index-1", pub); err != nil {
		t.Fatal(err)
	}
	work, err := s.Purges(ctx, "ann-index-1")
	if err != nil || len(work) != 1 {
		t.Fatalf("purges: %+v %v", work, err)
	}
	ids := work[0].Artifacts
	if _, err := s.Ack(ctx, f.ID, "ann-index-1", ids, ed25519.Sign(priv, erasure.AckPayload(f.ID, "ann-index-1", ids))); err != nil {
		t.Fatal(err)
	}
	if f = mustVerify(t, s, f.ID); f.State != shredd.StateErased || !f.Overdue {
		t.Fatalf("erased after the deadline: %s, overdue %v", f.State, f.Overdue)
	}
}

// untrimmedRoot is a local root file whose Trim reports the old versions
// destroyed but keeps them: a root store that does not do what it says.
type untrimmedRoot struct{ *local.Root }

func (r untrimmedRoot) Trim(_ context.Context, minVersion int) ([]int, error) {
	var retired []int
	for v := 1; v < minVersion; v++ {
		retired = append(retired, v)
	}
	return retired, nil
}

// TestReadPathAsksTheRootStore: read_path_converged takes the root store's
// own report of its versions, not the database's record of the epoch: a
// root store that still holds the versions below the epoch keeps the
// forget from being erased.
func TestReadPathAsksTheRootStore(t *testing.T) {
	root, err := local.Open(filepath.Join(t.TempDir(), "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	c := shreddtest.NewClock()
	s := shreddtest.New(t, onClock(c, shreddtest.Options{Root: untrimmedRoot{root}, Kinds: []string{"episodic"}})).Both()
	shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "alice record")
	f := forgetThroughEpoch(t, s, c, "alice", time.Minute)
	f = mustVerify(t, s, f.ID)
	// Read back before claiming: the forget is not even shredded, and
	// says why.
	rp := conditions(f)[shredd.CondReadPathConverged]
	var er shredd.Condition
	for _, c := range f.Conditions {
		if c.Name == "epoch_rotated" {
			er = c
		}
	}
	if f.State == shredd.StateErased || f.State == shredd.StateShredded || rp.Status != "pending" || er.Status != "pending" || !strings.Contains(er.Reason, "still holds root version 1") {
		t.Fatalf("a root store that kept its old versions: %s, read path %+v, epoch %+v", f.State, rp, er)
	}
}
