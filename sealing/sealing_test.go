package sealing_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/testkit/shreddtest"
)

func TestLineageAndForget(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "alice record")
	bob := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, "bob record")
	// Three hops: record -> summary -> summary of summary (+ bob) -> embedding.
	h1 := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Parents: []shredd.ID{rec.Artifact}}, "hop1")
	h2 := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Parents: []shredd.ID{h1.Artifact}, Subjects: []string{"bob"}}, "hop2")
	h3 := shreddtest.Seal(t, s, shredd.Source{Kind: "embedding", Parents: []shredd.ID{h2.Artifact}}, "hop3")
	if h3.Lineage != 2 {
		t.Fatalf("three-hop lineage has %d subjects, want 2", h3.Lineage)
	}
	agg := shreddtest.Seal(t, s, shredd.Source{Kind: "summary", Subjects: []string{"alice", "bob", "carol"}}, "aggregate")
	held, err := s.Register(ctx, shredd.Source{Kind: "embedding", Parents: []shredd.ID{rec.Artifact}, Holder: "ann-index"})
	if err != nil {
		t.Fatal(err)
	}
	if held.Lineage != 1 || held.Sealed {
		t.Fatalf("plaintext-held artifact: %+v", held)
	}
	for _, c := range []shredd.Sealed{rec, h1, h2, h3, agg} {
		if _, err := s.Decrypt(ctx, c.Ciphertext, nil); err != nil {
			t.Fatalf("before forget: %v", err)
		}
	}

	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if f.State != shredd.StateCommitted || f.Barrier < 6 {
		t.Fatalf("forget = %+v", f)
	}
	for name, c := range map[string]shredd.Sealed{"record": rec, "hop1": h1, "hop2": h2, "hop3": h3, "aggregate": agg} {
		if _, err := s.Decrypt(ctx, c.Ciphertext, nil); !errors.Is(err, shredd.ErrShredded) {
			t.Errorf("%s after forget: %v, want ErrShredded", name, err)
		}
	}
	if got, err := s.Decrypt(ctx, bob.Ciphertext, nil); err != nil || string(got.Plaintext) != "bob record" {
		t.Fatalf("bob after alice's forget: %v", err)
	}
	refused := map[string]shredd.Source{
		"direct":          {Kind: "episodic", Subjects: []string{"alice"}},
		"parent":          {Kind: "summary", Parents: []shredd.ID{rec.Artifact}},
		"grandparent":     {Kind: "summary", Parents: []shredd.ID{h2.Artifact}, Subjects: []string{"dave"}},
		"aggregate":       {Kind: "summary", Subjects: []string{"carol", "alice"}},
		"held-derivative": {Kind: "embedding", Parents: []shredd.ID{held.ID}, Holder: "ann-index"},
	}
	for name, src := range refused {
		if _, err := s.Encrypt(ctx, src, []byte("x"), nil); !errors.Is(err, shredd.ErrShredded) {
			t.Errorf("encrypt %s after forget: %v, want ErrShredded", name, err)
		}
		if src.Holder == "" {
			src.Holder = "h1"
		}
		if _, err := s.Register(ctx, src); !errors.Is(err, shredd.ErrShredded) {
			t.Errorf("register %s after forget: %v, want ErrShredded", name, err)
		}
	}
	again, err := s.Forget(ctx, "alice")
	if err != nil || again.ID != f.ID {
		t.Fatalf("second forget: %v, id %s vs %s", err, again.ID, f.ID)
	}

	// Shredded only after the re-key and an epoch.
	if err := s.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if f, _ = s.GetForget(ctx, f.ID); f.State != shredd.StateCommitted || f.RekeyedAt.IsZero() {
		t.Fatalf("after reconcile: %+v", f)
	}
	if _, err := s.RunEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	if f, _ = s.GetForget(ctx, f.ID); f.State != shredd.StateShredded || f.Epoch != 1 {
		t.Fatalf("after epoch: %+v", f)
	}
	for _, c := range f.Conditions {
		if c.Status != "ok" {
			t.Errorf("condition %s still %s", c.Name, c.Status)
		}
	}
	if got, err := s.Decrypt(ctx, bob.Ciphertext, nil); err != nil || string(got.Plaintext) != "bob record" {
		t.Fatalf("bob after epoch: %v", err)
	}
	list, err := s.Forgets(ctx, shredd.StateShredded, 0)
	if err != nil || len(list) != 1 || list[0].ID != f.ID {
		t.Fatalf("list shredded: %v %d", err, len(list))
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	rec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "r")
	cases := []struct {
		name string
		src  shredd.Source
		want error
	}{
		{"unknown kind", shredd.Source{Kind: "secret-kind", Subjects: []string{"alice"}}, shredd.ErrUnknownKind},
		{"bad kind name", shredd.Source{Kind: "Bad Kind", Subjects: []string{"alice"}}, shredd.ErrInvalid},
		{"unknown parent", shredd.Source{Kind: "summary", Parents: []shredd.ID{{1, 2, 3}}}, shredd.ErrUnknownParent},
		{"no source", shredd.Source{Kind: "summary"}, shredd.ErrInvalid},
		{"empty subject", shredd.Source{Kind: "summary", Subjects: []string{""}}, shredd.ErrInvalid},
		{"too many parents", shredd.Source{Kind: "summary", Parents: make([]shredd.ID, registry.MaxParents+1)}, shredd.ErrTooLarge},
		{"bad holder", shredd.Source{Kind: "summary", Parents: []shredd.ID{rec.Artifact}, Holder: "a b"}, shredd.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.Encrypt(ctx, c.src, []byte("x"), nil); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	many := make([]string, registry.MaxSubjects+1)
	for i := range many {
		many[i] = fmt.Sprint("s", i)
	}
	if _, err := s.Encrypt(ctx, shredd.Source{Kind: "summary", Subjects: many}, nil, nil); !errors.Is(err, shredd.ErrTooLarge) {
		t.Fatalf("lineage over the limit: %v", err)
	}
	if _, err := s.Decrypt(ctx, rec.Ciphertext, []byte("other context")); !errors.Is(err, shredd.ErrEnvelope) {
		t.Fatalf("wrong context: %v", err)
	}
	if _, err := s.Decrypt(ctx, "shredd:v1:AAAA", nil); !errors.Is(err, shredd.ErrEnvelope) {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := s.Register(ctx, shredd.Source{Kind: "summary", Subjects: []string{"x"}}); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("register without holder: %v", err)
	}
	if _, err := s.GetForget(ctx, shredd.ID{9}); !errors.Is(err, shredd.ErrNotFound) {
		t.Fatalf("unknown forget: %v", err)
	}
}

// TestBarrierRace forgets a subject while many goroutines encrypt, derive and
// decrypt for it. Whatever the interleaving: no artifact sealed after the
// forget committed carries the subject, and no ciphertext of the subject
// decrypts after the commit.
func TestBarrierRace(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	base := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}, "base")
	bobRec := shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"bob"}}, "bob")

	var committed atomic.Bool
	type result struct {
		c     shredd.Sealed
		after bool // the encrypt started after the forget returned
	}
	var mu sync.Mutex
	var sealed []result
	var lateDecrypts atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				after := committed.Load()
				var src shredd.Source
				switch g % 4 {
				case 0:
					src = shredd.Source{Kind: "episodic", Subjects: []string{"alice"}}
				case 1:
					src = shredd.Source{Kind: "summary", Parents: []shredd.ID{base.Artifact}}
				case 2:
					src = shredd.Source{Kind: "summary", Subjects: []string{"bob", "alice", fmt.Sprint("x", g, i)}}
				case 3:
					startedAfter := committed.Load()
					_, err := s.Decrypt(ctx, base.Ciphertext, nil)
					if err == nil && startedAfter {
						lateDecrypts.Add(1)
					}
					if err != nil && !errors.Is(err, shredd.ErrShredded) {
						t.Errorf("decrypt: %v", err)
						return
					}
					if _, err := s.Decrypt(ctx, bobRec.Ciphertext, nil); err != nil {
						t.Errorf("bob decrypt: %v", err)
						return
					}
					continue
				}
				out, err := s.Encrypt(ctx, src, []byte("payload"), nil)
				if err != nil {
					if !errors.Is(err, shredd.ErrShredded) {
						t.Errorf("encrypt: %v", err)
						return
					}
					continue
				}
				mu.Lock()
				sealed = append(sealed, result{out, after})
				mu.Unlock()
			}
		}(g)
	}
	time.Sleep(50 * time.Millisecond)
	f, err := s.Forget(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	committed.Store(true)
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()

	if n := lateDecrypts.Load(); n != 0 {
		t.Fatalf("%d decrypts of alice's data started after the forget and succeeded", n)
	}
	var before int
	for _, r := range sealed {
		a, err := s.GetArtifact(ctx, r.c.Artifact)
		if err != nil {
			t.Fatalf("sealed artifact not registered: %v", err)
		}
		if r.after || a.Seq > f.Barrier {
			t.Fatalf("artifact %s (seq %d, barrier %d, started after: %v) carries alice", a.ID, a.Seq, f.Barrier, r.after)
		}
		before++
		if _, err := s.Decrypt(ctx, r.c.Ciphertext, nil); !errors.Is(err, shredd.ErrShredded) {
			t.Fatalf("a ciphertext of alice decrypts after the commit: %v", err)
		}
	}
	t.Logf("%d artifacts of alice sealed before the barrier, none after", before)
	if before == 0 {
		t.Fatal("the race never sealed anything before the forget; the test proves nothing")
	}
}

// TestGroupCommitIsolation registers many artifacts at once, so that they
// share group commits, where some items must be refused (an unregistered
// kind, a forgotten subject) or are plaintext-held: every refused item gets
// its own error, and every other item is registered and decrypts.
func TestGroupCommitIsolation(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	shreddtest.Seal(t, s, shredd.Source{Kind: "episodic", Subjects: []string{"gone"}}, "before")
	if _, err := s.Forget(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	const n = 400
	errs := make([]error, n)
	out := make([]shredd.Sealed, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := shredd.Source{Kind: "episodic", Subjects: []string{fmt.Sprint("s", i%37)}}
			switch i % 5 {
			case 1:
				src.Kind = "never-registered"
			case 2:
				src.Subjects = append(src.Subjects, "gone")
			case 3:
				src.Holder = "holder-1"
				_, errs[i] = s.Register(ctx, src)
				return
			}
			out[i], errs[i] = s.Encrypt(ctx, src, []byte(fmt.Sprint("item ", i)), nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch i % 5 {
		case 1:
			if !errors.Is(err, shredd.ErrUnknownKind) {
				t.Errorf("item %d (unknown kind): %v", i, err)
			}
		case 2:
			if !errors.Is(err, shredd.ErrShredded) {
				t.Errorf("item %d (forgotten subject): %v", i, err)
			}
		case 3:
			if err != nil {
				t.Errorf("item %d (plaintext-held): %v", i, err)
			}
		default:
			if err != nil {
				t.Errorf("item %d: %v", i, err)
				continue
			}
			got, err := s.Decrypt(ctx, out[i].Ciphertext, nil)
			if err != nil || string(got.Plaintext) != fmt.Sprint("item ", i) {
				t.Errorf("item %d: decrypt %q, %v", i, got.Plaintext, err)
			}
			if _, err := s.GetArtifact(ctx, out[i].Artifact); err != nil {
				t.Errorf("item %d: not registered: %v", i, err)
			}
		}
	}
}

// TestCallsAfterClose: after Close, calls that need the background writers
// fail with ErrUnavailable instead of panicking, and Close is idempotent;
// what was sealed before still reads its registration.
func TestCallsAfterClose(t *testing.T) {
	ctx := context.Background()
	svc := shreddtest.NewService(t)
	sealed, err := svc.Encrypt(ctx, shredd.Source{Subjects: []string{"alice"}, Kind: "episodic"}, []byte("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.Registry.Close()
	svc.Registry.Close()
	if _, err := svc.Encrypt(ctx, shredd.Source{Subjects: []string{"alice"}, Kind: "episodic"}, []byte("hi"), nil); !errors.Is(err, shredd.ErrUnavailable) {
		t.Fatalf("encrypt after Close: %v, want ErrUnavailable", err)
	}
	if _, err := svc.Decrypt(ctx, sealed.Ciphertext, nil); !errors.Is(err, shredd.ErrUnavailable) {
		t.Fatalf("decrypt after Close: %v, want ErrUnavailable", err)
	}
	if _, err := svc.Register(ctx, shredd.Source{Subjects: []string{"bob"}, Kind: "embedding", Holder: "ann"}); !errors.Is(err, shredd.ErrUnavailable) {
		t.Fatalf("register after Close: %v, want ErrUnavailable", err)
	}
	if _, err := svc.GetArtifact(ctx, sealed.Artifact); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverCommitsRequested: a forget an earlier release left requested
// by a crash (its row written, the key not yet destroyed) is committed by
// Recover, which serve runs before it listens.
func TestRecoverCommitsRequested(t *testing.T) {
	ctx := context.Background()
	b := shreddtest.New(t, shreddtest.Options{Kinds: []string{"episodic"}})
	sealed, err := b.Sealer.Encrypt(ctx, shredd.Source{Subjects: []string{"alice"}, Kind: "episodic"}, []byte("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sid := b.Hasher.SID("alice")
	id := shredd.ID{1, 2, 3}
	now := time.Now()
	if _, err := b.DB.ExecContext(ctx, `INSERT INTO forgets(id, sid, state, requested_at, deadline) VALUES (?, ?, 'requested', ?, ?)`,
		id[:], sid[:], now.UnixNano(), now.Add(time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if err := b.Eraser.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := b.Eraser.GetForget(ctx, id)
	if err != nil || f.State != shredd.StateCommitted {
		t.Fatalf("after Recover: %+v, %v", f, err)
	}
	if _, err := b.Sealer.Decrypt(ctx, sealed.Ciphertext, nil); !errors.Is(err, shredd.ErrShredded) {
		t.Fatalf("decrypt after the recovered forget: %v, want ErrShredded", err)
	}
	// A forget of the same subject now is that one.
	again, err := b.Eraser.Forget(ctx, "alice")
	if err != nil || again.ID != id {
		t.Fatalf("forget again: %+v, %v", again, err)
	}
}

// TestSubjectIDsMustBeUTF8: the service itself (not only the HTTP layer)
// refuses subject ids that are not valid UTF-8, for encrypt, forget and the
// preview, so that two different byte strings can never become one subject.
func TestSubjectIDsMustBeUTF8(t *testing.T) {
	ctx := context.Background()
	s := shreddtest.NewService(t)
	bad := "p\xffq"
	if _, err := s.Encrypt(ctx, shredd.Source{Subjects: []string{bad}, Kind: "episodic"}, []byte("x"), nil); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("encrypt for an invalid UTF-8 subject: %v, want ErrInvalid", err)
	}
	if _, err := s.Forget(ctx, bad); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("forget of an invalid UTF-8 subject: %v, want ErrInvalid", err)
	}
	if _, err := s.Preview(ctx, bad); !errors.Is(err, shredd.ErrInvalid) {
		t.Fatalf("preview of an invalid UTF-8 subject: %v, want ErrInvalid", err)
	}
}
