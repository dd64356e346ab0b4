package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd/api/client"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/testkit/pgtest"
)

// agentMemory is one holder of the story: an agent's memory that keeps
// vectors in its index and, on its query path, a cache of recent vectors.
// Its retrieval path (search) looks in both, as the agent's answers do.
type agentMemory struct {
	mu     sync.Mutex
	index  map[string]bool
	cache  map[string]bool
	sticky bool // purges the index only: the cached vector stays
}

func (m *agentMemory) put(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.index[id], m.cache[id] = true, true
}

func (m *agentMemory) purge(_ context.Context, _ string, ids []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.index, id)
		if !m.sticky {
			delete(m.cache, id)
		}
	}
	return ids, nil // every row deleted: the ack is honest about the rows
}

// search is the agent's retrieval path: the index, then the cache.
func (m *agentMemory) search(_ context.Context, _ string, ids, markers []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var found []string
	for _, id := range ids {
		if m.index[id] || m.cache[id] {
			found = append(found, id)
		}
	}
	return found, nil
}

func (m *agentMemory) cached() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cache)
}

func (m *agentMemory) dropCache() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.cache)
}

// TestFourteenHolders is the seed's story on the real binary with the Go
// holder kit: fourteen agents hold embeddings of alice's memory; each
// deletes its rows and acks; the fourteenth keeps answering from a cached
// vector. Without probes that forget reaches erased on the acks (shown
// with bob and a holder that answers no probes: the attestation states it
// as ack_only_holders). With probes, the fourteenth's probe finds the
// vector, the forget stays pending naming it, and it is erased only once
// the cache is purged and a later probe, after its compaction interval, is
// clean; the attestation carries every holder's signed clean probe, and
// shredd verify accepts it.
func TestFourteenHolders(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { fourteenHolders(t, nil) })
	t.Run("postgres", func(t *testing.T) {
		srv, err := pgtest.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		fourteenHolders(t, []string{"--store", srv.NewDatabase(t)})
	})
}

func fourteenHolders(t *testing.T, store []string) {
	dir := t.TempDir()
	s := startServer(t, filepath.Join(dir, "data"), serverOpts{Args: append([]string{"--epoch-interval", "1s", "--cache-ttl", "1s"}, store...)})
	defer s.stop()
	ctx := t.Context()
	admin, err := client.New(s.base, s.token)
	if err != nil {
		t.Fatal(err)
	}
	s.putKinds(t, "episodic", "embedding")
	alice, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"alice@example.com"}, Kind: "episodic", Plaintext: []byte("alice: allergic to penicillin")})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"bob@example.com"}, Kind: "episodic", Plaintext: []byte("bob: prefers trains")})
	if err != nil {
		t.Fatal(err)
	}

	const compact = 2 * time.Second
	type agent struct {
		kit *client.Holder
		mem *agentMemory
	}
	var agents []agent
	newAgent := func(name string, sticky, probes bool, parent string) agent {
		seed := sha256.Sum256([]byte("fourteen holders " + name))
		h, err := client.NewHolder(admin, name, ed25519.NewKeyFromSeed(seed[:]))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Register(ctx, admin); err != nil {
			t.Fatal(err)
		}
		if probes {
			if err := h.DeclareProbes(ctx, compact); err != nil {
				t.Fatal(err)
			}
		}
		a := agent{kit: h, mem: &agentMemory{index: map[string]bool{}, cache: map[string]bool{}, sticky: sticky}}
		art, err := admin.Register(ctx, client.RegisterRequest{Parents: []string{parent}, Kind: "embedding", Holder: name})
		if err != nil {
			t.Fatal(err)
		}
		a.mem.put(art.ID)
		return a
	}
	for i := 1; i <= 14; i++ {
		agents = append(agents, newAgent(fmt.Sprintf("agent-%02d", i), i == 14, true, alice.Artifact))
	}
	quiet := newAgent("agent-noprobe", true, false, bob.Artifact) // acks, keeps a cached vector, answers no probes
	carol, err := admin.Encrypt(ctx, client.EncryptRequest{Subjects: []string{"carol@example.com"}, Kind: "episodic", Plaintext: []byte("carol: lives in Lyon")})
	if err != nil {
		t.Fatal(err)
	}
	quitter := newAgent("agent-quitter", true, true, carol.Artifact) // caught by a probe, then withdraws its probes

	// The agents run their kits: purge rounds and probe rounds.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for _, a := range append(slices.Clone(agents), quiet, quitter) {
				if _, err := a.kit.PurgeOnce(ctx, a.mem.purge); err != nil && ctx.Err() == nil {
					t.Errorf("%s: purge round: %v", a.kit.ID(), err)
				}
				if r, err := a.kit.ProbeOnce(ctx, a.mem.search); (err != nil || r.Err() != nil) && ctx.Err() == nil {
					t.Errorf("%s: probe round: %v %v", a.kit.ID(), err, r.Err())
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	// Without probes: bob's forget is erased on the ack alone, and the
	// attestation says so.
	fb, err := admin.Forget(ctx, "bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.waitForget(t, fb.ID, "erased", func(f forgetView) bool { return f.State == "erased" })
	t.Logf("bob erased after %s", time.Since(start).Round(time.Millisecond))
	att, err := admin.Attestation(ctx, fb.ID)
	if err != nil {
		t.Fatal(err)
	}
	st := openAttestation(t, s, att)
	if len(st.Predicate.Probes) != 0 || !hasResidual(st, attest.ResidualAckOnlyHolders, "agent-noprobe") {
		t.Fatalf("bob's attestation: probes %+v, residuals %+v", st.Predicate.Probes, st.Predicate.Residuals)
	}
	if quiet.mem.cached() == 0 {
		t.Fatal("the quiet agent's cache was purged: the control shows nothing")
	}

	// A holder caught by a probe cannot withdraw its way out: the probes
	// asked keep gating the forget, and it is erased only once a later
	// probe is clean.
	fc, err := admin.Forget(ctx, "carol@example.com")
	if err != nil {
		t.Fatal(err)
	}
	s.waitForget(t, fc.ID, "held up by agent-quitter's probe", func(f forgetView) bool {
		c := conditionOf(f, "cascade_closed")
		return strings.Contains(c.Reason, "agent-quitter") && strings.Contains(c.Reason, "found 1 of the artifacts")
	})
	if err := quitter.kit.DeclareProbes(ctx, 0); err != nil {
		t.Fatal(err)
	}

	time.Sleep(compact + compact/2 + time.Second)
	if f := s.getForget(t, fc.ID); f.State == "erased" || !strings.Contains(conditionOf(f, "cascade_closed").Reason, "agent-quitter") {
		t.Fatalf("carol's forget after agent-quitter withdrew its probes: %s %+v", f.State, conditionOf(f, "cascade_closed"))
	}
	quitter.mem.dropCache()
	s.waitForget(t, fc.ID, "erased", func(f forgetView) bool { return f.State == "erased" })

	// With probes: alice's forget waits for agent-14's cache.
	fa, err := admin.Forget(ctx, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	pending := s.waitForget(t, fa.ID, "held up by agent-14's probe", func(f forgetView) bool {
		c := conditionOf(f, "cascade_closed")
		return c.Status == "pending" && strings.Contains(c.Reason, "agent-14") && strings.Contains(c.Reason, "found 1 of the artifacts")
	})
	t.Logf("alice held up by agent-14's probe after %s", time.Since(start).Round(time.Millisecond))
	// Past every holder's compaction interval: the thirteen honest agents
	// are closed by their clean probes, the forget still waits for one.
	time.Sleep(compact + compact/2 + time.Second)
	pending = s.getForget(t, fa.ID)
	if pending.State == "erased" {
		t.Fatalf("alice's forget was erased while agent-14 still answers from its cache: %+v", pending)
	}
	c := conditionOf(pending, "cascade_closed")
	for i := 1; i <= 13; i++ {
		if strings.Contains(c.Reason, fmt.Sprintf("agent-%02d", i)) {
			t.Fatalf("an honest agent holds the forget up: %s", c.Reason)
		}
	}
	if !strings.Contains(c.Reason, "agent-14") {
		t.Fatalf("cascade_closed does not name agent-14: %s", c.Reason)
	}
	t.Logf("pending: %s", c.Reason)

	// The cache is purged: a later probe is clean, and the forget erased.
	agents[13].mem.dropCache()
	start = time.Now()
	s.waitForget(t, fa.ID, "erased", func(f forgetView) bool { return f.State == "erased" })
	t.Logf("alice erased %s after agent-14's cache was purged", time.Since(start).Round(time.Millisecond))
	att, err = admin.Attestation(ctx, fa.ID)
	if err != nil {
		t.Fatal(err)
	}
	st = openAttestation(t, s, att)
	probed := map[string]bool{}
	for _, p := range st.Predicate.Probes {
		probed[p.Holder] = true
		if len(p.Found) != 0 || p.AskedAt.Before(st.Predicate.Timeline.Committed) {
			t.Fatalf("probe in the attestation: %+v", p)
		}
	}
	if len(probed) != 14 || hasResidual(st, attest.ResidualAckOnlyHolders, "") {
		t.Fatalf("alice's attestation: %d holders probed, residuals %+v", len(probed), st.Predicate.Residuals)
	}
	// The export verifies with shredd verify, probes and all.
	exp, err := admin.Export(ctx, fa.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	expFile := filepath.Join(dir, "alice.tar.gz")
	if err := os.WriteFile(expFile, exp, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runShredd(t, "verify", expFile, "--key", filepath.Join(s.dataDir, "attestation.pub"), "--log-key", filepath.Join(s.dataDir, "log.vkey"))
	if code != 0 || !strings.Contains(out, "VERIFIED") {
		t.Fatalf("shredd verify: exit %d\n%s%s", code, out, errOut)
	}
}

func conditionOf(f forgetView, name string) condition {
	for _, c := range f.Verification {
		if c.Name == name {
			return c
		}
	}
	for _, c := range f.Conditions {
		if c.Name == name {
			return c
		}
	}
	return condition{}
}

func openAttestation(t *testing.T, s *server, att []byte) *attest.Statement {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(s.dataDir, "attestation.pub"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := bundle.CheckAttestation(att, key, "", nil)
	if err != nil {
		t.Fatalf("the attestation does not verify: %v", err)
	}
	return st
}

func hasResidual(st *attest.Statement, kind, mention string) bool {
	for _, r := range st.Predicate.Residuals {
		if r.Kind == kind && strings.Contains(r.Description, mention) {
			return true
		}
	}
	return false
}
