package sealing_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// The batch paths answer item by item as the single calls do: results in
// order, a refused item alone, derivatives with their parents' lineage,
// leases as parents, and data keys that seal envelopes Decrypt opens.
func TestBatchItems(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "alice record")
	gone := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"gone"}}, "gone record")
	opened, err := s.DecryptFor(ctx, rec.Ciphertext, nil, shredd.Reader{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forget(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	in := []shredd.SealInput{
		{Source: shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, Plaintext: []byte("bob"), Context: []byte("c")},
		{Source: shredd.Source{Kind: "nokind", Subjects: []string{"bob"}}, Plaintext: []byte("x")},
		{Source: shredd.Source{Kind: "summary", Subjects: []string{"carol"}, Parents: []shredd.ID{rec.Artifact}}, Plaintext: []byte("sum")},
		{Source: shredd.Source{Kind: "summary", Parents: []shredd.ID{gone.Artifact}}, Plaintext: []byte("x")},
		{Source: shredd.Source{Kind: "summary", Parents: []shredd.ID{{1, 2, 3}}}, Plaintext: []byte("x")},
		{Source: shredd.Source{Kind: "summary", Leases: []shredd.ID{opened.Lease.ID}}, Plaintext: []byte("from a lease")},
		{Source: shredd.Source{Kind: "episodic", Subjects: []string{"gone"}}, Plaintext: []byte("x")},
		{Source: shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, Context: make([]byte, envelope.MaxContext+1)},
	}
	wantErr := []error{nil, shredd.ErrUnknownKind, nil, shredd.ErrShredded, shredd.ErrUnknownParent, nil, shredd.ErrShredded, shredd.ErrTooLarge}
	wantLineage := []int{1, 0, 2, 0, 0, 1, 0, 0}
	check := func(name string, i int, err error, lineage int) {
		t.Helper()
		if wantErr[i] == nil && err != nil || wantErr[i] != nil && !errors.Is(err, wantErr[i]) {
			t.Errorf("%s item %d: %v, want %v", name, i, err, wantErr[i])
		}
		if err == nil && lineage != wantLineage[i] {
			t.Errorf("%s item %d: lineage %d, want %d", name, i, lineage, wantLineage[i])
		}
	}
	sealed, errs := s.EncryptMany(ctx, in)
	for i := range in {
		check("EncryptMany", i, errs[i], sealed[i].Lineage)
		if errs[i] != nil {
			continue
		}
		got, err := s.Decrypt(ctx, sealed[i].Ciphertext, in[i].Context)
		if err != nil || !bytes.Equal(got.Plaintext, in[i].Plaintext) || got.Artifact != sealed[i].Artifact {
			t.Errorf("EncryptMany item %d: decrypt %v", i, err)
		}
	}
	srcs := make([]shredd.Source, len(in))
	for i := range in {
		srcs[i] = in[i].Source
	}
	wantErr[7] = nil // no context here: the client binds it
	wantLineage[7] = 1
	dks, errs := s.DataKeys(ctx, srcs)
	for i := range srcs {
		check("DataKeys", i, errs[i], dks[i].Lineage)
		if errs[i] != nil {
			continue
		}
		b, err := envelope.SealWithKey(nil, envelope.DataKey{Header: dks[i].Header, Key: dks[i].Key}, []byte(fmt.Sprint("item ", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.DecryptBinary(ctx, b, nil, shredd.Reader{})
		if err != nil || string(got.Plaintext) != fmt.Sprint("item ", i) || got.Artifact != dks[i].Artifact {
			t.Errorf("DataKeys item %d: decrypt %v", i, err)
		}
	}
	if _, errs := s.DataKeys(ctx, make([]shredd.Source, 1001)); !errors.Is(errs[0], shredd.ErrTooLarge) {
		t.Errorf("batch of 1001: %v", errs[0])
	}
}

// A batch item registered after a forget's commit never carries the
// forgotten subject: the batch path holds the barrier as the single path
// does (TestBarrierRace).
func TestBatchBarrierRace(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	base := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "base")
	var committed atomic.Bool
	var mu sync.Mutex
	var late []shredd.ID // registered with alice by a batch that started after the commit
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				after := committed.Load()
				srcs := []shredd.Source{
					{Kind: "episodic", Subjects: []string{"alice"}},
					{Kind: "summary", Parents: []shredd.ID{base.Artifact}},
					{Kind: "episodic", Subjects: []string{fmt.Sprint("x", g, i)}},
				}
				dks, errs := s.DataKeys(ctx, srcs)
				for j := range 2 {
					switch {
					case errs[j] == nil && after:
						mu.Lock()
						late = append(late, dks[j].Artifact)
						mu.Unlock()
					case errs[j] != nil && !errors.Is(errs[j], shredd.ErrShredded):
						t.Errorf("item %d: %v", j, errs[j])
						return
					}
				}
				if errs[2] != nil {
					t.Errorf("unrelated item: %v", errs[2])
					return
				}
			}
		}()
	}
	if _, err := s.Forget(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	committed.Store(true)
	for range 20 { // let batches that start after the commit run
		if _, errs := s.DataKeys(ctx, []shredd.Source{{Kind: "episodic", Subjects: []string{"alice"}}}); !errors.Is(errs[0], shredd.ErrShredded) {
			t.Fatalf("after the commit: %v, want ErrShredded", errs[0])
		}
	}
	close(stop)
	wg.Wait()
	if len(late) > 0 {
		t.Fatalf("%d artifacts registered with a forgotten subject after the commit", len(late))
	}
}
