package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/testkit/pgtest"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// The tests of this file run three shredd nodes on one PostgreSQL database
// and one Vault Transit root key, and check that a forget converges on the
// nodes that stay up: each node judges the root store from a fresh read,
// and the work a dead node owed is done by the others within the heartbeat
// bound of docs/scale-out.md ("T_prop across nodes").

// convergeTTL is the nodes' --cache-ttl: with the 2 s of silence a dead
// node is given (keystore.HeartbeatInterval × 2), it is the heartbeat bound.
const convergeTTL = 2 * time.Second

// cluster is three (or more) nodes on one database and one Vault key.
type cluster struct {
	dsn        string
	vault      *vaulttest.Server
	mount, key string
	first      string // the data directory holding the shared secrets
}

func newCluster3(t *testing.T, key string) (*cluster, []*server) {
	t.Helper()
	c := &cluster{dsn: pgtest.Shared(t).NewDatabase(t), vault: newVault(t), mount: "transit", key: key}
	a := c.node(t)
	b, d := c.node(t), c.node(t)
	return c, []*server{a, b, d}
}

func (c *cluster) opts(env ...string) serverOpts {
	o := vaultOpts(c.vault, c.mount, c.key, "--store", c.dsn, "--cache-ttl", convergeTTL.String(), "--lease-ttl", "3s")
	return opts2(o, env...)
}

// node starts one more node of the cluster, with env (a crash point).
func (c *cluster) node(t *testing.T, env ...string) *server {
	t.Helper()
	s := clusterNode(t, c.first, c.opts(env...))
	if c.first == "" {
		c.first = s.dataDir
	}
	return s
}

// kill SIGKILLs a node, and waits for its death.
func (s *server) kill() {
	s.t.Helper()
	_ = s.cmd.Process.Kill()
	s.waitKilled()
}

// readPath returns a forget's read_path_converged condition.
func readPath(f forgetView) condition {
	for _, c := range append(f.Conditions, f.Verification...) {
		if c.Name == "read_path_converged" {
			return c
		}
	}
	return condition{Name: "read_path_converged", Status: "missing"}
}

// onlyEpochPending reports whether a committed forget waits for its epoch
// and for nothing else.
func onlyEpochPending(f forgetView) bool {
	for _, c := range f.Verification {
		switch {
		case c.Name == "read_path_converged" && !strings.Contains(c.Reason, "no epoch yet"):
			return false
		case c.Name != "read_path_converged" && c.Name != "backups_epoch" && c.Status != "ok":
			return false
		}
	}
	return len(f.Verification) > 0
}

// waitErased polls a forget through the nodes given, in turn, until it is
// erased; it fails the test at deadline. No node may ever show a stale
// judgement of the root store ("still holds root version") once the
// epoch's answer is in.
func waitErased(t *testing.T, id string, deadline time.Time, nodes ...*server) forgetView {
	t.Helper()
	for i := 0; ; i++ {
		f := nodes[i%len(nodes)].getForget(t, id)
		if f.State == "erased" {
			return f
		}
		if rp := readPath(f); strings.Contains(rp.Reason, "root store still holds") || strings.Contains(rp.Reason, "has not reported its key") {
			t.Fatalf("forget %s through %s: judged from a stale read of the root store: %+v", id, nodes[i%len(nodes)].name, rp)
		}
		if time.Now().After(deadline) {
			t.Fatalf("forget %s not erased by the deadline through the live nodes: %+v", id, f)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkAttestation fetches the attestation of forget id through s, checks
// it offline with shredd verify, and checks that its key evidence is the
// root store's state now: the Transit key's latest version, and no version
// below the forget's epoch left.
func (c *cluster) checkAttestation(t *testing.T, s *server, f forgetView, subject, salt string) {
	t.Helper()
	r := s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+f.Forget+"/attestation", nil)
	file := filepath.Join(t.TempDir(), "attestation.json")
	if err := os.WriteFile(file, r.Body, 0o600); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(c.first, node.AttestationPubFile)
	if code, stdout, stderr := runShredd(t, "verify", file, "--key", pub, "--subject", subject, "--salt", salt); code != 0 || !strings.Contains(stdout, "VERIFIED") {
		t.Fatalf("shredd verify of an attestation through %s: %d\n%s%s", s.name, code, stdout, stderr)
	}
	var env struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	st, err := attest.ParseStatement(payload)
	if err != nil {
		t.Fatal(err)
	}
	k := st.Predicate.KeyEvidence
	tk := readTransitKey(t, c.vault, c.mount, c.key)
	if k.RootKeyConfig == nil || len(k.RetiredRootVersions) == 0 || k.RootKeyConfig.MinAvailableVersion < tk.MinAvailable || k.RootKeyConfig.MinAvailableVersion <= k.RetiredRootVersions[len(k.RetiredRootVersions)-1] ||
		k.RootKeyConfig.LatestVersion < k.RootKeyConfig.MinAvailableVersion || k.RootKeyConfig.LatestVersion > tk.Latest {
		t.Fatalf("attestation through %s: key evidence %+v (%+v), Vault now %+v: not what the root store reports", s.name, k, k.RootKeyConfig, tk)
	}
}

// TestClusterFreshRootRead: right after an epoch through node b, node c
// judges read_path_converged from the root store as it is now, not from
// its own last read of it (Vault destroyed the old versions): the forget
// is erased through c as soon as it is through b, and the attestation c
// serves carries the root store's state after the epoch.
func TestClusterFreshRootRead(t *testing.T) {
	c, nodes := newCluster3(t, "shredd-fresh")
	a, b, cc := nodes[0], nodes[1], nodes[2]
	a.putKinds(t, "episodic")
	rec := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice likes tea", "m1")
	for _, n := range nodes {
		n.open(t, rec) // every node read the root store's key and cached alice's
	}
	f := a.forget(t, "alice@example.com")
	// Wait until every node applied the eviction (or the TTL passed) and
	// the leases of the decrypts above expired: all the forget still waits
	// for then is the epoch.
	deadline := time.Now().Add(hang)
	for !onlyEpochPending(cc.getForget(t, f.Forget)) {
		if time.Now().After(deadline) {
			t.Fatalf("the forget waits for more than the epoch: %+v", cc.getForget(t, f.Forget))
		}
		time.Sleep(100 * time.Millisecond)
	}
	e := b.runEpoch(t)
	// At once through c: the read path is judged from Vault now.
	got := cc.getForget(t, f.Forget)
	if rp := readPath(got); rp.Status != "ok" {
		t.Fatalf("read_path_converged through c right after epoch %d through b: %+v (forget %s)", e.Epoch, rp, got.State)
	}
	var v forgetView
	cc.expect(t, http.StatusOK, http.MethodPost, "/v1/forgets/"+f.Forget+"/verify", nil).into(t, &v)
	if v.State != "erased" {
		t.Fatalf("verify through c right after the epoch through b: %s %+v", v.State, v.Verification)
	}
	c.checkAttestation(t, cc, v, "alice@example.com", f.CommitmentSalt)
	for _, n := range nodes {
		n.checkNoRace()
	}
}

// TestClusterEpochRunnerDies: the node that ran an epoch dies right after
// it — killed at the step after the epoch's last write (before it marked
// the forget shredded or answered), or SIGKILLed right after its answer —
// and the forget reaches erased through the other nodes within the
// heartbeat bound, without the dead node coming back; the attestation
// the others sign is the root store's state after the epoch.
func TestClusterEpochRunnerDies(t *testing.T) {
	c, nodes := newCluster3(t, "shredd-runner")
	a, cc := nodes[0], nodes[2]
	a.putKinds(t, "episodic")
	for i, how := range []string{"epoch:done", "after the answer"} {
		subject := fmt.Sprintf("runner-%d@example.com", i)
		rec := a.seal(t, sealReq{Subject: subject, Kind: "episodic"}, "record of "+subject, "m")
		var runner *server
		if how == "after the answer" {
			runner = c.node(t)
		} else {
			runner = c.node(t, "SHREDD_TEST_CRASH_AT="+how)
		}
		for _, n := range []*server{a, cc, runner} {
			n.open(t, rec)
		}
		f := a.forget(t, subject)
		a.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
		if how == "after the answer" {
			runner.runEpoch(t)
			runner.kill()
		} else {
			if r, err := runner.call(http.MethodPost, "/v1/epoch", nil); err == nil {
				t.Fatalf("the epoch was answered before its crash point: %d %s", r.Status, r.Body)
			}
			runner.killedAt(t, how)
		}
		killed := time.Now()
		// The runner's last heartbeat is before killed: 2 s of silence and
		// its cache TTL bound it; the rest is polling and the others' 1 s
		// background tick.
		got := waitErased(t, f.Forget, killed.Add(2*time.Second+convergeTTL+10*time.Second), a, cc)
		t.Logf("%s: erased through the other nodes %v after the kill (bound: last heartbeat + 2s + TTL %v)", how, time.Since(killed).Round(10*time.Millisecond), convergeTTL)
		if !strings.Contains(readPath(got).Reason, "every node") {
			t.Fatalf("%s: erased without accounting for every node: %+v", how, readPath(got))
		}
		for _, n := range []*server{a, cc} {
			n.shredded(t, rec)
		}
		c.checkAttestation(t, cc, got, subject, f.CommitmentSalt)
	}
	if tk := readTransitKey(t, c.vault, c.mount, c.key); tk.Latest != 3 {
		t.Fatalf("Vault's key at version %d after two epochs, want 3 (one rotation each)", tk.Latest)
	}
}

// TestClusterNodeGoneForGood: a node SIGKILLed (never restarted) before a
// forget it never heard of: the forget reaches erased through the others
// on the heartbeat bound — not before the dead node's cache could have
// let go (its last heartbeat + 2 s + its TTL), and not long after.
func TestClusterNodeGoneForGood(t *testing.T) {
	c, nodes := newCluster3(t, "shredd-gone")
	a, b, gone := nodes[0], nodes[1], nodes[2]
	a.putKinds(t, "episodic")
	rec := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice likes tea", "m1")
	gone.open(t, rec) // its cache holds alice's key when it dies
	gone.kill()
	killed := time.Now()
	f := a.forget(t, "alice@example.com")
	b.shredded(t, rec)
	a.runEpoch(t)
	got := waitErased(t, f.Forget, killed.Add(2*time.Second+convergeTTL+10*time.Second), b, a)
	// The dead node's last heartbeat is at most HeartbeatInterval (1 s)
	// before the kill; allow 0.5 s of clock between processes.
	if earliest := killed.Add(-time.Second + 2*time.Second + convergeTTL - 500*time.Millisecond); got.ErasedAt == nil || got.ErasedAt.Before(earliest) {
		t.Fatalf("erased at %v, before the dead node's cache could have let go (%v)", got.ErasedAt, earliest)
	}
	t.Logf("erased at %v after the kill (bound: last heartbeat + 2s + TTL %v)", got.ErasedAt.Sub(killed).Round(10*time.Millisecond), convergeTTL)
	if rp := readPath(got); !strings.Contains(rp.Reason, "every node (3)") {
		t.Fatalf("erased without the dead node in the count: %+v", rp)
	}
	c.checkAttestation(t, a, got, "alice@example.com", f.CommitmentSalt)
}

// TestClusterConcurrentEpochs: POST /v1/epoch on three nodes at once, a few
// rounds: every call answers 200 with an epoch of its round, and each epoch
// the database records rotated the Vault key exactly once from where the
// one before left it. A call that finds another's epoch running answers
// with that one (RunEpoch), so a round runs one to three epochs: under
// load a call can reach its node after another node's epoch has started.
func TestClusterConcurrentEpochs(t *testing.T) {
	c, nodes := newCluster3(t, "shredd-epochs")
	nodes[0].putKinds(t, "episodic")
	const rounds = 3
	var last int64 // the newest epoch of the rounds before
	epochs := 0    // the epochs the rounds ran
	for r := range rounds {
		subject := fmt.Sprintf("round-%d@example.com", r)
		rec := nodes[r%3].seal(t, sealReq{Subject: subject, Kind: "episodic"}, subject, "m")
		f := nodes[(r+1)%3].forget(t, subject)
		var wg sync.WaitGroup
		eps := make([]epochView, len(nodes))
		for i, n := range nodes {
			wg.Go(func() { eps[i] = n.runEpoch(t) })
		}
		wg.Wait()
		seen := map[int64]bool{}
		newest := last
		for _, e := range eps {
			if e.Epoch <= last || e.FinishedAt.IsZero() {
				t.Fatalf("round %d: a call answered epoch %d, not a finished epoch of its round (the last before: %d): %+v", r, e.Epoch, last, eps)
			}
			seen[e.Epoch] = true
			newest = max(newest, e.Epoch)
		}
		if newest != last+int64(len(seen)) {
			t.Fatalf("round %d: answered epochs %v after %d: one ran that no call answered, %+v", r, seen, last, eps)
		}
		last, epochs = newest, epochs+len(seen)
		for _, n := range nodes {
			n.shredded(t, rec)
		}
		waitErased(t, f.Forget, time.Now().Add(hang), nodes[(r+2)%3])
	}
	tk := readTransitKey(t, c.vault, c.mount, c.key)
	if tk.Latest != 1+epochs {
		t.Fatalf("Vault's key at version %d after %d epochs, want %d", tk.Latest, epochs, 1+epochs)
	}
	t.Logf("%d epochs for %d calls", epochs, 3*rounds)
	checkEpochsOnce(t, c.dsn, tk.Latest)
}

// forgetSteps are the durable steps a forget passes (the crash points of
// erasure and keystore it hits, in order), and how the dying node is made
// to reach each: "forget" through it (answered or not), "epoch" asked of
// it, or "verify" asked of it. Left to TestCrashRecovery on one node:
// rekey:chunk (a bucket of more than keystore's chunk of subjects),
// subject:destroyed (per-subject keys) and ledger:headkept (a node also
// hits it at its start, before it serves).
var forgetSteps = []struct {
	step, via string
	answered  bool // whether the forget may be answered before the step
}{
	{"ledger:appended", "forget", false}, // first: a later node's start appends the forgets it finds
	{"forget:committed", "forget", false},
	{"rekey:committed", "forget", true},
	{"forget:rekeyed", "forget", true},
	{"epoch:started", "epoch", true},
	{"epoch:rotated", "epoch", true},
	{"epoch:rewrapped", "epoch", true},
	{"epoch:trimmed", "epoch", true},
	{"log:appended", "epoch", true},
	{"epoch:done", "epoch", true},
	{"forget:erased", "verify", true},
}

// TestClusterCrashEveryForgetStep kills a node at each durable step of a
// forget (a fresh node each time; the dead ones never come back): the
// others refuse the subject at once when the forget committed, the forget
// is found through them (nothing answered is lost), and it reaches erased
// through them without the dead node. Which node does a background step
// (a re-key, a verification) is not fixed: when another node did it first,
// the case is tried again with a new subject.
func TestClusterCrashEveryForgetStep(t *testing.T) {
	c, nodes := newCluster3(t, "shredd-steps")
	a, b := nodes[0], nodes[1]
	a.putKinds(t, "episodic")
	known := map[string]bool{}
	for _, st := range forgetSteps {
		for attempt := 0; ; attempt++ {
			if attempt == 4 {
				t.Fatalf("%s: the dying node never reached the step in 4 tries", st.step)
			}
			if crashStep(t, c, a, b, st.step, st.via, st.answered, attempt, known) {
				t.Logf("%s: a node killed there, the forget erased through the others (try %d)", st.step, attempt+1)
				break
			}
		}
	}
	if tk := readTransitKey(t, c.vault, c.mount, c.key); tk.Latest < 3 {
		t.Fatalf("Vault at version %d", tk.Latest)
	} else {
		checkEpochsOnce(t, c.dsn, tk.Latest)
	}
	for _, n := range nodes[:2] {
		n.checkNoRace()
	}
}

// crashStep runs one case of TestClusterCrashEveryForgetStep; it reports
// false when another node did the step before the dying one.
func crashStep(t *testing.T, c *cluster, a, b *server, step, via string, answered bool, attempt int, known map[string]bool) bool {
	t.Helper()
	subject := fmt.Sprintf("%s-%d@example.com", strings.ReplaceAll(step, ":", "-"), attempt)
	rec := a.seal(t, sealReq{Subject: subject, Kind: "episodic"}, "record of "+subject, "m")
	d := c.node(t, "SHREDD_TEST_CRASH_AT="+step)
	d.open(t, rec)
	var id string
	switch via {
	case "forget":
		// A background step may kill the node before its answer is out
		// (the re-key starts as the forget commits): then it is a forget
		// committed and not answered, and found below like one.
		r, err := d.call(http.MethodPost, "/v1/forget", map[string]string{"subject": subject})
		switch {
		case err == nil && !answered:
			t.Fatalf("%s: the forget was answered before the step: %d %s", step, r.Status, r.Body)
		case err == nil && r.Status != http.StatusAccepted:
			t.Fatalf("%s: the forget: %d %s", step, r.Status, r.Body)
		case err == nil:
			var f forgetView
			r.into(t, &f)
			id = f.Forget
		}
	case "epoch", "verify":
		id = a.forget(t, subject).Forget
		a.waitForget(t, id, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	}
	switch via {
	case "epoch":
		if r, err := d.call(http.MethodPost, "/v1/epoch", nil); err == nil {
			t.Fatalf("%s: the epoch was answered before the step: %d %s", step, r.Status, r.Body)
		}
	case "verify":
		a.runEpoch(t)
		deadline := time.Now().Add(15 * time.Second)
		for {
			r, err := d.call(http.MethodPost, "/v1/forgets/"+id+"/verify", nil)
			if err != nil {
				break // killed
			}
			var f forgetView
			r.into(t, &f)
			if f.State == "erased" { // another node erased it first
				d.stop()
				known[id] = true
				return false
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not erased: %+v", step, f)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		if via == "forget" && id != "" {
			d.stop() // another node did the background step first
			// The forget waits for its epoch (waitErased judges every
			// answer after the epoch's as fresh).
			a.waitForget(t, id, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
			a.runEpoch(t)
			waitErased(t, id, time.Now().Add(hang), a, b)
			known[id] = true
			return false
		}
	}
	d.killedAt(t, step)
	// The others refuse the subject when the forget committed: every case
	// but a death before the commit.
	for _, n := range []*server{a, b} {
		n.shredded(t, rec)
	}
	if id == "" {
		// Not answered, but committed: the others list it.
		for _, f := range a.listForgets(t, "") {
			if !known[f.Forget] {
				id = f.Forget
			}
		}
		if id == "" {
			t.Fatalf("%s: the committed forget is not found through the others", step)
		}
	}
	if via != "verify" {
		a.runEpoch(t) // after an epoch step: resumes the dead node's epoch, or runs one after it
	}
	waitErased(t, id, time.Now().Add(hang), b, a)
	known[id] = true
	return true
}

// ring hands out the nodes of a cluster in turn, as a load balancer
// without affinity does (server.ring).
type ring struct {
	mu    sync.Mutex
	nodes []*server
	i     int
}

func (r *ring) next() *server {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[r.i%len(r.nodes)]
	r.i++
	return n
}

// TestStoriesRoundRobin plays the seven stories of stories_e2e_test.go
// against three nodes on one PostgreSQL database and one Vault root key,
// each request of a story to the next node: every state and reason a
// story checks holds whichever node answers. The stories run one after
// the other (21 nodes at once would only measure the machine).
func TestStoriesRoundRobin(t *testing.T) {
	v := newVault(t)
	pg := pgtest.Shared(t)
	for i, st := range stories {
		t.Run(st.name, func(t *testing.T) {
			st.run(t, func(t *testing.T, extra ...string) *server {
				t.Helper()
				c := &cluster{dsn: pg.NewDatabase(t), vault: v, mount: "transit", key: fmt.Sprintf("shredd-story-%d", i)}
				// The stories' own flags: the read path converges at once
				// (a cache TTL of 1ns), leases of 3 s unless extra says.
				o := vaultOpts(v, c.mount, c.key, append([]string{"--store", c.dsn, "--cache-ttl", "1ns", "--lease-ttl", "3s"}, extra...)...)
				var nodes []*server
				for range 3 {
					n := clusterNode(t, c.first, o)
					if c.first == "" {
						c.first = n.dataDir
					}
					nodes = append(nodes, n)
				}
				front := *nodes[0]
				front.name = "3 nodes, round robin"
				front.ring = &ring{nodes: nodes}
				return &front
			})
		})
	}
}
