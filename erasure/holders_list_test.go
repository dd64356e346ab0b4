package erasure_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// TestListHoldersAgreesWithPurges: the pending work ListHolders counts in
// SQL is what Purges lists for every holder (artifacts per forget, an
// artifact in two open forgets counted twice, acked ones and erased
// forgets not at all), before and after acks, an erasure and a breaking
// inventory; the last ack is the time of the holder's latest ack, the
// inventory its latest report; pages of every size walk every holder once,
// in id order; Only keeps one holder; a bad limit or cursor is refused.
func TestListHoldersAgreesWithPurges(t *testing.T) {
	ctx := context.Background()
	s, c := newClockedService(t)
	// First letters all differ: every collation orders these ids alike.
	ids := []string{"ann-1", "bert", "cache-3", "dora.idx", "eve@svc", "fig:2", "gus"}
	keys := map[string]ed25519.PrivateKey{}
	for _, id := range ids {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		if _, _, err := s.RegisterHolder(ctx, id, pub); err != nil {
			t.Fatal(err)
		}
		keys[id] = priv
		c.Add(time.Second)
	}
	register := func(holder string, src shredd.Source) shredd.ID {
		t.Helper()
		src.Holder = holder
		a, err := s.Register(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	alice := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "a").Artifact
	bob := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, "b").Artifact
	carol := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"carol"}}, "c").Artifact
	a1 := register("ann-1", shredd.Source{Kind: "embedding", Parents: []shredd.ID{alice}})
	a2 := register("ann-1", shredd.Source{Kind: "embedding", Parents: []shredd.ID{alice}})
	both := register("ann-1", shredd.Source{Kind: "summary", Parents: []shredd.ID{alice, bob}}) // in both forgets
	register("ann-1", shredd.Source{Kind: "embedding", Parents: []shredd.ID{carol}})            // carol is not forgotten
	c3 := register("cache-3", shredd.Source{Kind: "summary", Subjects: []string{"alice"}})
	register("eve@svc", shredd.Source{Kind: "embedding", Parents: []shredd.ID{bob}})
	// Sealed artifacts need no purge: bert holds nothing in plaintext.
	shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Parents: []shredd.ID{alice}, Holder: "bert"}, "s")
	fa, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	fb, err := s.Forget(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}

	lastAck := map[string]time.Time{}
	check := func(phase string, want map[string][2]int) {
		t.Helper()
		all, err := s.ListHolders(ctx, shredd.HolderQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if all.Next != "" || len(all.Holders) != len(ids) {
			t.Fatalf("%s: %d holders, next %q", phase, len(all.Holders), all.Next)
		}
		for i, h := range all.Holders {
			if h.ID != ids[i] {
				t.Fatalf("%s: holder %d is %s, want %s", phase, i, h.ID, ids[i])
			}
			reg, err := s.GetHolder(ctx, h.ID)
			if err != nil || !reg.CreatedAt.Equal(h.CreatedAt) {
				t.Errorf("%s: %s created %v, registered %v (%v)", phase, h.ID, h.CreatedAt, reg.CreatedAt, err)
			}
			ps, err := s.Purges(ctx, h.ID)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, p := range ps {
				n += len(p.Artifacts)
			}
			if h.PendingArtifacts != n || h.PendingForgets != len(ps) {
				t.Errorf("%s: %s pending %d artifacts of %d forgets, Purges lists %d of %d", phase, h.ID, h.PendingArtifacts, h.PendingForgets, n, len(ps))
			}
			if w := want[h.ID]; h.PendingArtifacts != w[0] || h.PendingForgets != w[1] {
				t.Errorf("%s: %s pending %d artifacts of %d forgets, want %v", phase, h.ID, h.PendingArtifacts, h.PendingForgets, w)
			}
			if !h.LastAck.Equal(lastAck[h.ID]) {
				t.Errorf("%s: %s last ack %v, want %v", phase, h.ID, h.LastAck, lastAck[h.ID])
			}
		}
		// Pages of every size: every holder once, in order.
		for limit := 1; limit <= len(ids)+1; limit++ {
			var walked []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > len(ids) {
					t.Fatalf("%s: limit %d: the pages do not end", phase, limit)
				}
				p, err := s.ListHolders(ctx, shredd.HolderQuery{Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Holders) > limit {
					t.Fatalf("%s: a page of %d with limit %d", phase, len(p.Holders), limit)
				}
				for i, h := range p.Holders {
					walked = append(walked, h.ID)
					if g := all.Holders[slices.Index(ids, h.ID)]; g.PendingArtifacts != h.PendingArtifacts || !g.LastAck.Equal(h.LastAck) {
						t.Errorf("%s: limit %d: %s (item %d) differs from the whole listing", phase, limit, h.ID, i)
					}
				}
				if cursor = p.Next; cursor == "" {
					break
				}
			}
			if !slices.Equal(walked, ids) {
				t.Errorf("%s: limit %d walked %v", phase, limit, walked)
			}
		}
	}
	check("committed", map[string][2]int{"ann-1": {4, 2}, "cache-3": {1, 1}, "eve@svc": {1, 1}})

	ack := func(f shredd.ID, holder string, arts ...shredd.ID) {
		t.Helper()
		c.Add(time.Minute)
		if _, err := s.Ack(ctx, f, holder, arts, ed25519.Sign(keys[holder], erasure.AckPayload(f, holder, arts))); err != nil {
			t.Fatal(err)
		}
		lastAck[holder] = c.Now()
	}
	ack(fa.ID, "ann-1", a1)
	ack(fb.ID, "ann-1", both) // closes both for bob's forget only
	check("acked", map[string][2]int{"ann-1": {2, 1}, "cache-3": {1, 1}, "eve@svc": {1, 1}})

	// Alice's forget erased: its work is gone, even what was never acked
	// by a holder of another forget.
	ack(fa.ID, "ann-1", a2, both)
	ack(fa.ID, "cache-3", c3)
	if _, err := s.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Hour)
	if f := mustVerify(t, s, fa.ID); f.State != shredd.StateErased {
		t.Fatalf("alice: %s %+v", f.State, conditions(f))
	}
	check("erased", map[string][2]int{"eve@svc": {1, 1}})

	// Inventories: the latest report of each holder, clean or not.
	if _, err := s.ReportInventory(ctx, "gus", []shredd.InventoryItem{{ID: "00000000000000000000000000000000", Kind: "nope"}}); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	if _, err := s.ReportInventory(ctx, "eve@svc", nil); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListHolders(ctx, shredd.HolderQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range all.Holders {
		inv := h.Inventory
		switch h.ID {
		case "gus":
			if inv == nil || inv.Items != 1 || inv.UnknownArtifacts != 1 || inv.UnknownKinds != 1 || inv.Clean() || !inv.ReportedAt.Equal(c.Now().Add(-time.Second)) {
				t.Errorf("gus: inventory %+v", inv)
			}
		case "eve@svc":
			if inv == nil || inv.Items != 0 || !inv.Clean() || !inv.ReportedAt.Equal(c.Now()) {
				t.Errorf("eve@svc: inventory %+v", inv)
			}
		default:
			if inv != nil {
				t.Errorf("%s: an inventory it never reported: %+v", h.ID, inv)
			}
		}
	}

	// Only: one holder, or none.
	if p, err := s.ListHolders(ctx, shredd.HolderQuery{Only: "eve@svc"}); err != nil || len(p.Holders) != 1 || p.Holders[0].ID != "eve@svc" || p.Holders[0].PendingArtifacts != 1 {
		t.Errorf("only eve@svc: %+v %v", p, err)
	}
	if p, err := s.ListHolders(ctx, shredd.HolderQuery{Only: "nobody"}); err != nil || len(p.Holders) != 0 || p.Next != "" {
		t.Errorf("only an unknown holder: %+v %v", p, err)
	}
	for _, q := range []shredd.HolderQuery{{Limit: -1}, {Limit: shredd.MaxHolderPage + 1}, {Cursor: "!"}, {Cursor: "YW5uLTE="}, {Cursor: shredd.HolderCursor("a b")}, {Only: "a b"}} {
		if _, err := s.ListHolders(ctx, q); !errors.Is(err, shredd.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", q, err)
		}
	}
}
