package erasure_test

import (
	"context"
	"errors"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestPreview checks the dry run: direct, derived by hops, collateral and
// plaintext-held artifacts, and that it changes nothing.
func TestPreview(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "r")
	h1 := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Parents: []shredd.ID{rec.Artifact}}, "h1")
	h2 := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Parents: []shredd.ID{h1.Artifact}, Subjects: []string{"bob"}}, "h2")
	agg := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Subjects: []string{"carol", "alice"}}, "agg")
	held, err := s.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{h2.Artifact}, Holder: "ann-1"})
	if err != nil {
		t.Fatal(err)
	}
	shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, "b") // not in alice's lineage

	p, err := s.Preview(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	want := map[shredd.ID]struct {
		hops       int
		collateral bool
		sealed     bool
	}{
		rec.Artifact: {0, false, true}, agg.Artifact: {0, true, true},
		h1.Artifact: {1, false, true}, h2.Artifact: {2, true, true}, held.ID: {3, true, false},
	}
	if p.Total != 5 || p.Direct != 2 || p.Derived != 3 || p.Collateral != 3 || p.PlaintextHeld != 1 || p.Truncated || p.AlreadyForgotten {
		t.Fatalf("counts = %+v", p)
	}
	last := -1
	for _, a := range p.Artifacts {
		w, ok := want[a.ID]
		if !ok {
			t.Fatalf("artifact %s is not in alice's lineage", a.ID)
		}
		if a.Hops != w.hops || (a.Others > 0) != w.collateral || a.Sealed != w.sealed {
			t.Errorf("artifact %s: hops %d others %d sealed %v, want %+v", a.ID, a.Hops, a.Others, a.Sealed, w)
		}
		if a.Hops < last {
			t.Errorf("preview not ordered by hops")
		}
		last = a.Hops
		if a.ID == held.ID && a.Holder != "ann-1" {
			t.Errorf("plaintext-held artifact without its holder: %+v", a)
		}
	}
	// Nothing changed: alice still decrypts, nothing is forgotten.
	if _, err := s.Decrypt(ctx, rec.Ciphertext, nil); err != nil {
		t.Fatalf("the preview changed something: %v", err)
	}
	if fs, _ := s.Forgets(ctx, "", 0); len(fs) != 0 {
		t.Fatalf("the preview wrote %d forgets", len(fs))
	}
	// A subject never seen previews empty, and stays unknown.
	if p, err := s.Preview(ctx, "nobody"); err != nil || p.Total != 0 {
		t.Fatalf("unknown subject: %+v %v", p, err)
	}
	if _, err := s.Forget(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Preview(ctx, "alice"); !p.AlreadyForgotten {
		t.Fatal("preview after the forget does not say so")
	}
}

// TestLeases checks that a decrypt records a lease for the named holder,
// that a lease gives a derivative its artifact's lineage, and release.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "r")
	o, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{Holder: "summarizer-1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Lease.Artifact != rec.Artifact || o.Lease.Holder != "summarizer-1" || !o.Lease.ExpiresAt.After(o.Lease.IssuedAt) {
		t.Fatalf("lease = %+v", o.Lease)
	}
	got, err := s.Registry.GetLease(ctx, o.Lease.ID)
	if err != nil || got.ID != o.Lease.ID {
		t.Fatalf("lease not durable: %v", err)
	}
	sum, err := s.Encrypt(ctx, shredd.Source{Kind: "summary", Leases: []shredd.ID{o.Lease.ID}}, []byte("s"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Lineage != 1 {
		t.Fatalf("derivative through a lease has lineage %d, want 1", sum.Lineage)
	}
	if _, err := s.Encrypt(ctx, shredd.Source{Kind: "summary", Leases: []shredd.ID{{7}}}, nil, nil); !errors.Is(err, shredd.ErrUnknownParent) {
		t.Fatalf("unknown lease: %v", err)
	}
	if _, err := s.ReleaseLease(ctx, o.Lease.ID, "someone-else"); !errors.Is(err, shredd.ErrForbidden) {
		t.Fatalf("release by another holder: %v", err)
	}
	rel, err := s.ReleaseLease(ctx, o.Lease.ID, "summarizer-1")
	if err != nil || rel.ReleasedAt.IsZero() {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if _, err := s.Forget(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decrypt(ctx, sum.Ciphertext, nil); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("derivative through a lease after the forget: %v", err)
	}
}
