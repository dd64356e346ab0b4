package main

// End-to-end tests of the real binary with --root vault against a 3-node
// Vault Raft cluster (vaulttest.StartCluster), shredd given every node's
// address (--vault-addr a,b,c). The active Vault node is killed with
// SIGKILL under load and during an epoch; shredd is never restarted.

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// newCluster starts a 3-node Vault cluster and shows its nodes' logs when
// the test fails.
func newCluster(t *testing.T) *vaulttest.Cluster {
	t.Helper()
	c := vaulttest.StartCluster(t, 3)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("vault cluster logs:\n%s", c.Logs())
		}
	})
	return c
}

// clusterOpts returns the server options of shredd on the Transit key of
// the cluster, with every node's address, the active node first.
func clusterOpts(c *vaulttest.Cluster, key string, extra ...string) serverOpts {
	a := c.Active()
	addrs := []string{a.Addr}
	for _, n := range c.Standbys() {
		addrs = append(addrs, n.Addr)
	}
	args := []string{"--root", "vault", "--vault-addr", strings.Join(addrs, ","), "--vault-key", key}
	return serverOpts{Env: vaultEnv(c.RootToken), Args: append(args, extra...)}
}

// clusterKey reads a Transit key through the active node.
func clusterKey(t *testing.T, c *vaulttest.Cluster, key string) transitKey {
	t.Helper()
	sec, err := c.Client().Logical().Read("transit/keys/" + key)
	if err != nil || sec == nil {
		t.Fatalf("read transit key %s: %v", key, err)
	}
	return transitKeyOf(t, sec.Data)
}

// statusCounts counts the answers of one kind of request.
type statusCounts struct {
	mu sync.Mutex
	n  map[int]int // status (0: transport error) -> count
}

func (c *statusCounts) add(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[int]int{}
	}
	c.n[status]++
}

func (c *statusCounts) get(status int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[status]
}

// others returns the counts of the statuses not in allowed.
func (c *statusCounts) others(allowed ...int) map[int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]int{}
	for st, n := range c.n {
		if !slices.Contains(allowed, st) {
			out[st] = n
		}
	}
	return out
}

func (c *statusCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.n)
}

// waitFor polls ok until it reports true, failing the test after timeout.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, hang)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestVaultHAUnderLoad: clients encrypt and decrypt without pause while the
// active Vault node is killed, then a second node (no quorum, no leader),
// then the nodes come back. Requests served from cached keys always
// succeed; requests that need Vault answer 200 or 503 backend_unavailable
// and nothing else; while no leader exists they fail closed (503), and
// shredd serves them again by itself once a leader is elected.
func TestVaultHAUnderLoad(t *testing.T) {
	c := newCluster(t)
	const key = "shredd-ha-load"
	s := startServer(t, t.TempDir(), clusterOpts(c, key, "--buckets", "4096", "--cache-ttl", "10m"))
	s.putKinds(t, "episodic")
	subjects := []string{"alice", "bob", "carol", "dave"}
	var recs []record
	for _, who := range subjects {
		rec := s.seal(t, sealReq{Subject: who, Kind: "episodic"}, who+"'s record before the failover", who)
		s.open(t, rec)
		recs = append(recs, rec)
	}

	// cached: decrypts of the records and encrypts for their subjects (the
	// keys are in shredd's cache). fresh: encrypts for new subjects, whose
	// bucket key is mostly not cached yet (4096 buckets): Vault unwraps it.
	var cached, fresh statusCounts
	var freshSeq atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	load := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				f()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	status := func(method, path string, body any) int {
		r, err := s.call(method, path, body)
		if err != nil {
			return 0
		}
		if r.Status == http.StatusServiceUnavailable && !strings.Contains(string(r.Body), `"backend_unavailable"`) {
			return -http.StatusServiceUnavailable // a 503 of another kind
		}
		return r.Status
	}
	for i := range 2 {
		load(func() {
			j := int(freshSeq.Load()+int64(i)) % len(recs)
			cached.add(status(http.MethodPost, "/v1/decrypt", decryptReq(recs[j])))
			cached.add(status(http.MethodPost, "/v1/encrypt", sealReq{Subject: subjects[j], Kind: "episodic", Plaintext: b64("more"), Unit: writeUnit}))
		})
	}
	var freshOKAfter atomic.Int64 // fresh encrypts that succeeded since the mark
	var mark atomic.Bool
	load(func() {
		st := status(http.MethodPost, "/v1/encrypt", sealReq{Subject: fmt.Sprint("new-", freshSeq.Add(1)), Kind: "episodic", Plaintext: b64("new"), Unit: writeUnit})
		fresh.add(st)
		if st == http.StatusOK && mark.Load() {
			freshOKAfter.Add(1)
		}
	})
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitFor(t, "load before the failover", func() bool { return fresh.get(http.StatusOK) >= 5 && cached.get(http.StatusOK) >= 10 })

	// 1. The active node dies; the two others elect a leader.
	first := c.Active()
	first.Kill()
	mark.Store(true)
	second := c.Active()
	t.Logf("killed %s; %s is active", first.ID, second.ID)
	waitFor(t, "encrypts for new subjects after the election", func() bool { return freshOKAfter.Load() >= 5 })

	// 2. The new active node dies too: one node of three, no quorum, no
	// leader. What needs Vault fails closed; cached keys still serve.
	second.Kill()
	mark.Store(false)
	waitFor(t, "healthz 503 without a leader", func() bool {
		r, err := s.callToken(http.MethodGet, "/healthz", "-", nil)
		return err == nil && r.Status == http.StatusServiceUnavailable
	})
	s.expectProblem(t, http.StatusServiceUnavailable, "backend_unavailable", http.MethodPost, "/v1/epoch", nil)
	before := fresh.get(http.StatusServiceUnavailable)
	waitFor(t, "an encrypt for a new subject failing closed", func() bool {
		return fresh.get(http.StatusServiceUnavailable) > before
	})
	for _, rec := range recs {
		s.open(t, rec)
	}
	freshOKAfter.Store(0)
	mark.Store(true)

	// 3. A node comes back: quorum, a leader, and shredd serves again by
	// itself.
	first.Restart()
	waitFor(t, "healthz 200 after the restart", func() bool {
		r, err := s.callToken(http.MethodGet, "/healthz", "-", nil)
		return err == nil && r.Status == http.StatusOK
	})
	waitFor(t, "encrypts for new subjects after the restart", func() bool { return freshOKAfter.Load() >= 5 })
	second.Restart()
	c.WaitHealthy()
	close(stop)
	wg.Wait()

	t.Logf("cached keys: %s; new subjects: %s", &cached, &fresh)
	if o := cached.others(http.StatusOK); len(o) > 0 {
		t.Errorf("requests served from cached keys answered %v, want only 200 (all: %s)", o, &cached)
	}
	if o := fresh.others(http.StatusOK, http.StatusServiceUnavailable); len(o) > 0 {
		t.Errorf("encrypts for new subjects answered %v, want 200 or 503 backend_unavailable only (-503: another 503; 0: no answer)", o)
	}
	for _, rec := range recs {
		s.open(t, rec)
	}
	r := s.expect(t, http.StatusOK, http.MethodPost, "/v1/encrypt", sealReq{Subject: "erin", Kind: "episodic", Plaintext: b64("erin after the failovers"), Context: b64("e"), Unit: writeUnit})
	var out sealed
	r.into(t, &out)
	s.open(t, record{name: "erin", ciphertext: out.Ciphertext, context: "e", plaintext: "erin after the failovers", artifact: out.Artifact})
	s.stop()
}

// TestVaultHAEpoch: a forget waits for its epoch; POST /v1/epoch starts it,
// and the active Vault node is killed as soon as the root key has been
// rotated, while shredd rewraps 4096 bucket keys. The epoch fails closed
// (503) or completes; POST /v1/epoch is repeated until the forget is
// shredded. The epoch completed exactly once: one epoch in the database,
// one rotation in Vault (version 2, the only one left), the forget
// shredded by it, every other record readable.
func TestVaultHAEpoch(t *testing.T) {
	c := newCluster(t)
	const key = "shredd-ha-epoch"
	dir := t.TempDir()
	s, alice := startAlice(t, dir, clusterOpts(c, key, "--buckets", "4096"), "episodic")
	var live []record
	for i := range 8 {
		live = append(live, s.seal(t, sealReq{Subject: fmt.Sprint("subject-", i), Kind: "episodic"}, fmt.Sprint("record ", i), "r"))
	}
	f := s.forget(t, "alice")
	s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	if k := clusterKey(t, c, key); k.Latest != 1 {
		t.Fatalf("transit key before the epoch: %+v", k)
	}

	type answer struct {
		r   reply
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := s.call(http.MethodPost, "/v1/epoch", nil)
		done <- answer{r, err}
	}()
	// Kill the active node once the rotation is committed.
	var first answer
	killed := ""
	for killed == "" {
		select {
		case first = <-done:
			killed = "after the epoch"
		default:
			if a := c.ActiveNow(); a != nil {
				sec, err := a.Client().Logical().Read("transit/keys/" + key)
				if err == nil && sec != nil && vaulttest.Num(sec.Data["latest_version"]) >= 2 {
					a.Kill()
					killed = "during the epoch, after the rotation: " + a.ID
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if first.r.Status == 0 && first.err == nil {
		first = <-done
	}
	t.Logf("killed the active node %s; POST /v1/epoch answered %d", killed, first.r.Status)
	if killed == "after the epoch" {
		t.Fatalf("the epoch finished before the rotation was seen in Vault: nothing was killed during it (POST answered %d %s)", first.r.Status, first.r.Body)
	}
	if first.err != nil || (first.r.Status != http.StatusOK && first.r.Status != http.StatusServiceUnavailable) {
		t.Fatalf("POST /v1/epoch with the active Vault node killed: %v %d %s, want 200 or 503", first.err, first.r.Status, first.r.Body)
	}
	if first.r.Status == http.StatusServiceUnavailable {
		if p := first.r.problem(t); p.Code != "backend_unavailable" {
			t.Fatalf("POST /v1/epoch: 503 with code %q", p.Code)
		}
	}
	// Until the forget is shredded, ask for the epoch again: it resumes the
	// interrupted one (never a second rotation).
	attempts := 1
	deadline := time.Now().Add(hang)
	for !shreddedOrLater(s.getForget(t, f.Forget).State) {
		if time.Now().After(deadline) {
			t.Fatalf("forget not shredded %v after the kill: %+v", hang, s.getForget(t, f.Forget))
		}
		r := s.do(t, http.MethodPost, "/v1/epoch", nil)
		attempts++
		switch r.Status {
		case http.StatusOK:
		case http.StatusServiceUnavailable:
			time.Sleep(200 * time.Millisecond)
		default:
			t.Fatalf("POST /v1/epoch after the kill: %d %s, want 200 or 503", r.Status, r.Body)
		}
	}
	t.Logf("the forget was shredded after %d POST /v1/epoch", attempts)
	g := s.getForget(t, f.Forget)
	checkShreddedView(t, g)
	if g.Epoch != 1 {
		t.Fatalf("forget shredded by epoch %d, want 1", g.Epoch)
	}
	if k := clusterKey(t, c, key); k.Latest != 2 || k.MinAvailable != 2 || k.MinDecryption != 2 || !slices.Equal(k.Versions, []int{2}) {
		t.Fatalf("transit key after the epoch: %+v, want exactly one rotation: latest 2, the only version left", k)
	}
	s.shredded(t, alice)
	for _, rec := range live {
		s.open(t, rec)
	}
	s.stop()

	db, err := sqlite.Open(filepath.Join(dir, node.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var epochs, done1, stale int
	if err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE id=1 AND state='done' AND from_version=1 AND to_version=2 AND retired='1') FROM epochs`).Scan(&epochs, &done1); err != nil {
		t.Fatal(err)
	}
	if epochs != 1 || done1 != 1 {
		t.Fatalf("epochs table: %d epochs, %d done from version 1 to 2 retiring 1; want exactly one", epochs, done1)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM buckets WHERE root_version <> 2`).Scan(&stale); err != nil || stale != 0 {
		t.Fatalf("%d bucket keys not under root version 2 (%v)", stale, err)
	}
}
