package erasure_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shredd/shredd"
)

// TestListForgetsStates: the state filter of ListForgets (SQL) agrees with
// the state each forget reports (GetForget) for every state, blocked and
// overdue included; the counts partition the forgets; pages of every size
// walk the listing newest first with no gap and no repeat, also through
// forgets requested at the same instant; a bad cursor or limit is refused.
func TestListForgetsStates(t *testing.T) {
	ctx := context.Background()
	s, c := newClockedService(t)
	forget := func(subject string) shredd.ID {
		t.Helper()
		f, err := s.Forget(ctx, subject)
		if err != nil {
			t.Fatal(err)
		}
		return f.ID
	}
	// Overdue: requested more than the deadline (24h) before now.
	forget("dora")
	c.Add(25 * time.Hour)
	erased := forget("alice")
	forget("bob")
	if _, err := s.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute)
	if f := mustVerify(t, s, erased); f.State != shredd.StateErased {
		t.Fatalf("alice: %s", f.State)
	}
	// Three forgets at one instant: the ids order them.
	forget("carol")
	forget("erin")
	forget("frank")
	c.Add(time.Second)
	forget("gina")

	check := func(phase string, want map[string]int) {
		t.Helper()
		all, err := s.ListForgets(ctx, shredd.ForgetQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if all.Next != "" || len(all.Forgets) != 7 {
			t.Fatalf("%s: %d forgets, next %q", phase, len(all.Forgets), all.Next)
		}
		for st, n := range want {
			if all.Counts[st] != n {
				t.Errorf("%s: counts %v, want %v", phase, all.Counts, want)
				break
			}
		}
		byState := map[string][]shredd.ID{}
		for i, f := range all.Forgets {
			g, err := s.GetForget(ctx, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			byState[g.State] = append(byState[g.State], g.ID)
			if i > 0 {
				p := all.Forgets[i-1]
				if p.RequestedAt.Before(f.RequestedAt) || p.RequestedAt.Equal(f.RequestedAt) && slices.Compare(p.ID[:], f.ID[:]) < 0 {
					t.Errorf("%s: forget %d is not older than forget %d", phase, i, i-1)
				}
			}
		}
		for _, st := range []string{shredd.StateRequested, shredd.StateCommitted, shredd.StateShredded, shredd.StateErased, shredd.StateBlocked, shredd.StateOverdue} {
			page, err := s.ListForgets(ctx, shredd.ForgetQuery{State: st})
			if err != nil {
				t.Fatal(err)
			}
			var got []shredd.ID
			for _, f := range page.Forgets {
				got = append(got, f.ID)
				if f.State != st {
					t.Errorf("%s: state=%s lists a forget in state %s", phase, st, f.State)
				}
			}
			if !slices.Equal(got, byState[st]) || len(got) != want[st] {
				t.Errorf("%s: state=%s lists %v, the forgets in that state are %v (want %d)", phase, st, got, byState[st], want[st])
			}
		}
		for limit := 1; limit <= 7; limit++ {
			var walked []shredd.ID
			q := shredd.ForgetQuery{Limit: limit}
			for pages := 0; ; pages++ {
				if pages > 7 {
					t.Fatalf("%s: limit %d: the pages do not end", phase, limit)
				}
				p, err := s.ListForgets(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Forgets) > limit {
					t.Fatalf("%s: limit %d: a page of %d", phase, limit, len(p.Forgets))
				}
				for _, f := range p.Forgets {
					walked = append(walked, f.ID)
				}
				if p.Next == "" {
					break
				}
				q.Cursor = p.Next
			}
			var ids []shredd.ID
			for _, f := range all.Forgets {
				ids = append(ids, f.ID)
			}
			if !slices.Equal(walked, ids) {
				t.Errorf("%s: limit %d walks %v, want %v", phase, limit, walked, ids)
			}
		}
	}
	check("before the inventory", map[string]int{shredd.StateErased: 1, shredd.StateShredded: 1, shredd.StateCommitted: 4, shredd.StateOverdue: 1})

	// An inventory with an artifact shredd never registered blocks every
	// forget that is not erased, the overdue one included.
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	if _, _, err := s.RegisterHolder(ctx, "cache-9", pub); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReportInventory(ctx, "cache-9", []shredd.InventoryItem{{ID: "ffffffffffffffffffffffffffffffff", Kind: "episodic"}}); err != nil {
		t.Fatal(err)
	}
	check("with a breaking inventory", map[string]int{shredd.StateErased: 1, shredd.StateBlocked: 6})

	for _, q := range []shredd.ForgetQuery{{State: "gone"}, {Limit: -1}, {Limit: shredd.MaxForgetPage + 1}, {Cursor: "not a cursor"}, {Cursor: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}} {
		if _, err := s.ListForgets(ctx, q); !errors.Is(err, shredd.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", q, err)
		}
	}
}

// BenchmarkListForgetsPage lists one page of 50 forgets out of 2,000, the
// first and a later one.
func BenchmarkListForgetsPage(b *testing.B) {
	ctx := context.Background()
	s, _ := newClockedService(b)
	for i := range 2000 {
		if _, err := s.Forget(ctx, fmt.Sprintf("subject-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	first, err := s.ListForgets(ctx, shredd.ForgetQuery{Limit: 50})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		cursor string
	}{{"first", ""}, {"second", first.Next}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.ListForgets(ctx, shredd.ForgetQuery{Limit: 50, Cursor: c.cursor}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
