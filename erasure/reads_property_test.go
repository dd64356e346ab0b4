package erasure_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// The property of reads that become lineage (docs/api.md "What a read
// costs a writer"): random workloads of reads and writes by several
// writers, some refusing undeclared reads and some inheriting them, with
// declared, undeclared and independent writes, writes in and out of units
// of work, writes after a release and after an expiry, and forgets driven
// to erased. The writers are modelled as honest holders: a write derives
// from plaintext the writer still holds (read through shredd, in its unit
// or without one, its lease not expired: a holder drops plaintext by its
// lease's expiry), and declares independent only what it did not use.
// Invariant: once a forget is erased, nothing whose true derivation
// reaches the forgotten subject decrypts.

// modelRead is a read a modelled writer still holds.
type modelRead struct {
	lease    shredd.ID
	unit     string
	expires  time.Time
	subjects map[string]bool // the true derivation of what was read
}

// modelWriter is one writer: a token, its holder, and its policy.
type modelWriter struct {
	token, holder string
	inherit       bool
	held          []modelRead
}

// modelArtifact is an artifact the workload wrote, with its true derivation.
type modelArtifact struct {
	sealed   shredd.Sealed
	subjects map[string]bool
	what     string // how it was written, for messages
}

func TestReadsPropertyNothingDerivedSurvives(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { readsWorkload(t, seed) })
	}
}

func readsWorkload(t *testing.T, seed uint64) {
	ctx := context.Background()
	s, c := newClockedService(t)
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	subjects := []string{"ann", "ben", "cat", "dan", "eve"}
	writers := []*modelWriter{
		{token: "t-refuse", holder: "w1"}, {token: "t-refuse", holder: ""},
		{token: "t-inherit", holder: "w2", inherit: true}, {token: "t-other", holder: "w1"},
	}
	units := []string{"", "u1", "u2"}
	var arts []modelArtifact
	forgotten := map[string]bool{}
	for _, sub := range subjects {
		arts = append(arts, modelArtifact{sealed: shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{sub}}, sub),
			subjects: map[string]bool{sub: true}, what: "record of " + sub})
	}
	touches := func(m map[string]bool) bool {
		for sub := range m {
			if forgotten[sub] {
				return true
			}
		}
		return false
	}
	for step := range 120 {
		w := writers[rng.IntN(len(writers))]
		switch op := rng.IntN(10); {
		case op < 3: // read
			a := arts[rng.IntN(len(arts))]
			unit := units[rng.IntN(len(units))]
			o, err := s.DecryptFor(ctx, a.sealed.Ciphertext, nil, shredd.Reader{Holder: w.holder, Token: w.token, Unit: unit})
			if touches(a.subjects) {
				if !errors.Is(err, shredd.ErrShredded) {
					t.Fatalf("step %d: a read of %s after its forget: %v", step, a.what, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d: read %s: %v", step, a.what, err)
			}
			w.held = append(w.held, modelRead{lease: o.Lease.ID, unit: unit, expires: o.Lease.ExpiresAt, subjects: a.subjects})
		case op < 4: // a release: the lease ends, the read stays attributable
			if len(w.held) > 0 {
				r := w.held[rng.IntN(len(w.held))]
				if _, err := s.ReleaseLease(ctx, r.lease, ""); err != nil {
					t.Fatalf("step %d: release: %v", step, err)
				}
			}
		case op < 5: // time passes; an honest holder drops what expired
			c.Add(time.Duration(rng.IntN(240)) * time.Second)
			for _, w := range writers {
				w.held = slices.DeleteFunc(w.held, func(r modelRead) bool { return !c.Now().Before(r.expires) })
			}
		case op < 9:
			if a, ok := modelWrite(t, ctx, s, c, rng, w, writers, units, subjects, step); ok {
				arts = append(arts, a)
			}
		default: // a forget, driven to erased
			sub := subjects[rng.IntN(len(subjects))]
			if forgotten[sub] {
				continue
			}
			forgotten[sub] = true
			eraseAll(t, s, c, sub)
			for _, w := range writers {
				w.held = nil // the clock passed every lease
			}
			for _, a := range arts {
				_, err := s.Decrypt(ctx, a.sealed.Ciphertext, nil)
				if touches(a.subjects) && !errors.Is(err, shredd.ErrShredded) {
					t.Fatalf("step %d: %s derives from forgotten %v and still decrypts (%v)", step, a.what, keys(a.subjects), err)
				}
			}
		}
	}
}

// modelWrite has w write an artifact derived from some of what it holds,
// declared in one of the ways a writer may, and checks shredd's answer.
func modelWrite(t *testing.T, ctx context.Context, s *shreddtest.Service, c *shreddtest.Clock, rng *rand.Rand, w *modelWriter, writers []*modelWriter,
	units, subjects []string, step int) (modelArtifact, bool) {
	t.Helper()
	unit := units[rng.IntN(len(units))]
	own := subjects[rng.IntN(len(subjects))]
	src := shredd.Source{Kind: "summary", Subjects: []string{own}, Reader: w.token, Holder: w.holder, Unit: unit, InheritReads: w.inherit}
	truth := map[string]bool{own: true}
	// The reads this write answers for: those of its token whose holder
	// and unit match its own (equal, or either empty), its own and those
	// of the token's other holders; it derives only from some of its own.
	var visible, used []modelRead
	for _, o := range writers {
		if o.token != w.token || (o.holder != w.holder && o.holder != "" && w.holder != "") {
			continue
		}
		for _, r := range o.held {
			if unit == "" || r.unit == "" || r.unit == unit {
				visible = append(visible, r)
				if o == w && rng.IntN(2) == 0 {
					used = append(used, r)
				}
			}
		}
	}
	for _, r := range used {
		for sub := range r.subjects {
			truth[sub] = true
		}
	}
	mode := rng.IntN(4)
	switch mode {
	case 0: // names what it used, declares the rest independent
		for _, r := range visible {
			if slices.ContainsFunc(used, func(u modelRead) bool { return u.lease == r.lease }) {
				src.Leases = append(src.Leases, r.lease)
			} else {
				src.IndependentOf = append(src.IndependentOf, r.lease)
			}
		}
	case 1: // declares nothing
	case 2: // names only what it used: the rest stays undeclared
		for _, r := range used {
			src.Leases = append(src.Leases, r.lease)
		}
	case 3: // derived nothing it read, and says so (honestly: only then)
		if len(used) > 0 {
			return modelArtifact{}, false
		}
		src.Independent = true
	}
	out, err := s.Encrypt(ctx, src, []byte("derived"), nil)
	undeclared := mode == 1 && len(visible) > 0 || mode == 2 && len(visible) > len(used)
	var ud *shredd.UndeclaredDerivationError
	switch {
	case errors.Is(err, shredd.ErrShredded):
		return modelArtifact{}, false // a forgotten subject in what it names or inherits
	case undeclared && !w.inherit:
		if !errors.As(err, &ud) {
			t.Fatalf("step %d: an undeclared derivation by %s/%s was not refused: %v", step, w.token, w.holder, err)
		}
		// A refusal extends the reads it names by a lease TTL: their
		// readers evidently still hold them.
		for _, o := range writers {
			for i := range o.held {
				if slices.Contains(ud.Leases, o.held[i].lease) {
					o.held[i].expires = c.Now().Add(5 * time.Minute)
				}
			}
		}
		return modelArtifact{}, false
	case err != nil:
		t.Fatalf("step %d: write by %s/%s (mode %d): %v", step, w.token, w.holder, mode, err)
	}
	return modelArtifact{sealed: out, subjects: truth, what: fmt.Sprintf("write %d by %s/%s in unit %q (mode %d)", step, w.token, w.holder, unit, mode)}, true
}

// eraseAll forgets sub and drives the forget to erased: the epoch, the
// clock past every lease and the cache TTL.
func eraseAll(t *testing.T, s *shreddtest.Service, c *shreddtest.Clock, sub string) {
	t.Helper()
	f := forgetThroughEpoch(t, s, c, sub, 10*time.Minute)
	if f = mustVerify(t, s, f.ID); f.State != shredd.StateErased {
		t.Fatalf("forget of %s not erased: %s %+v", sub, f.State, conditions(f))
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
