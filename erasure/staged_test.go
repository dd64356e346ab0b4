package erasure_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// Registrations stage their lineage (registry.Registry.Settle); every reader
// by subject settles first or reads the staged rows too (lineage_all), so a
// forget made right after registrations, with nothing settled in between,
// still sees each of them: the preview counts them and the holder is asked
// to purge the plaintext-held one.
func TestStagedLineageIsRead(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RegisterHolder(ctx, "ann-index", pub); err != nil {
		t.Fatal(err)
	}
	var ids []shredd.ID
	for range 3 {
		ids = append(ids, shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "record").Artifact)
	}
	sum := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Parents: ids[:2], Subjects: []string{"bob"}}, "summary")
	p, err := s.Preview(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 4 || p.Direct != 3 || p.Derived != 1 {
		t.Fatalf("preview: total %d, direct %d, derived %d; want 4, 3, 1", p.Total, p.Direct, p.Derived)
	}
	// A registration, staged, then the forget and the purge work at once.
	if _, err := s.Register(ctx, shredd.Source{Kind: "embedding", Holder: "ann-index", Parents: []shredd.ID{sum.Artifact}}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	work, err := s.Purges(ctx, "ann-index")
	if err != nil {
		t.Fatal(err)
	}
	if len(work) != 1 || work[0].Forget != f.ID || len(work[0].Artifacts) != 1 {
		t.Fatalf("purge work of ann-index: %+v", work)
	}
}
