package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/testkit/pgtest"
	"github.com/shredd/shredd/translog"
)

// clusterNode starts one more shredd node on the PostgreSQL database dsn
// and the Vault key of v, in a data directory of its own holding copies of
// the first node's shared secrets (the subject secret, the attestation and
// log keys, the admin token), as an operator distributes them.
func clusterNode(t *testing.T, first string, o serverOpts) *server {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if first != "" {
		for _, f := range []string{node.SecretFile, node.AttestationKeyFile, node.AttestationPubFile, node.LogKeyFile, node.LogVKeyFile, node.TokenFile} {
			b, err := os.ReadFile(filepath.Join(first, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return startServer(t, dir, o)
}

// TestCluster runs three shredd nodes on one PostgreSQL database and one
// Vault root key, and drives the seed stories through different nodes: a
// forget committed through any node is refused by every node at once
// (warm caches included), derivative writes after the barrier are refused
// everywhere, a concurrent epoch runs once at a time and an interrupted one
// is resumed by another node exactly once, a node killed mid-forget loses
// nothing it answered, tokens hold on every node, and the transparency log
// stays one sequence whose checkpoints from different nodes are consistent.
func TestCluster(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	v := newVault(t)
	const mount, key = "transit", "shredd-cluster"
	opts := func(extra ...string) serverOpts {
		o := vaultOpts(v, mount, key, append([]string{"--store", dsn, "--cache-ttl", "2s", "--lease-ttl", "3s"}, extra...)...)
		return o
	}
	a := clusterNode(t, "", opts())
	b := clusterNode(t, a.dataDir, opts())
	c := clusterNode(t, a.dataDir, opts())
	nodes := []*server{a, b, c}

	// A local root file cannot join a database other nodes use.
	lr := startProcess(t, t.TempDir(), serverOpts{Args: []string{"--store", dsn}})
	select {
	case <-lr.done:
	case <-time.After(hang):
		t.Fatal("a local-root node on the cluster's database did not stop")
	}
	// Refused before it writes anything: it has none of the secrets the
	// cluster's database needs (subject.key and the keys), and a local root.
	if l := lr.logs.String(); !strings.Contains(l, "many nodes need one shared root store") && !strings.Contains(l, "holds data that needs them") {
		t.Fatalf("a local-root node joined the cluster:\n%s", lr.logs.String())
	}

	a.putKinds(t, "episodic", "summary")
	alice := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice likes tea", "m1")
	bob := b.seal(t, sealReq{Subject: "bob@example.com", Kind: "episodic"}, "bob likes coffee", "m2")
	summary := c.seal(t, sealReq{Parents: []string{alice.artifact}, Subjects: []string{"bob@example.com"}, Kind: "summary"}, "alice and bob", "s1")
	team := b.seal(t, sealReq{Subjects: []string{"alice@example.com", "bob@example.com", "carol@example.com"}, Kind: "summary"}, "the team", "s2")
	// Every node opens every record: all three caches hold alice's key.
	for _, n := range nodes {
		for _, rec := range []record{alice, bob, summary, team} {
			n.open(t, rec)
		}
	}
	cp1 := a.checkpoint(t)

	// Forget alice through b: a and c refuse at once, warm caches or not.
	f := b.forget(t, "alice@example.com")
	for _, n := range nodes {
		for _, rec := range []record{alice, summary, team} {
			n.shredded(t, rec)
		}
		n.open(t, bob)
	}
	// Derivative writes after the barrier, and new records of alice, are
	// refused on every node. (In the write unit: the checks above are no
	// reads these writes derive from.)
	for _, n := range []*server{a, c} {
		r := n.do(t, http.MethodPost, "/v1/encrypt", sealReq{Parents: []string{alice.artifact}, Kind: "summary", Plaintext: b64("re-derived"), Context: b64("x"), Unit: writeUnit})
		if r.Status != http.StatusGone {
			t.Fatalf("derivative of a forgotten record through another node: %d %s", r.Status, r.Body)
		}
		r = n.do(t, http.MethodPost, "/v1/encrypt", sealReq{Subject: "alice@example.com", Kind: "episodic", Plaintext: b64("again"), Context: b64("y"), Unit: writeUnit})
		if r.Status != http.StatusGone {
			t.Fatalf("new record of a forgotten subject through another node: %d %s", r.Status, r.Body)
		}
	}

	// Two epochs asked of two nodes at once run one after the other: each
	// rotates the root once, from where the other left it.
	before := readTransitKey(t, v, mount, key).Latest
	var wg sync.WaitGroup
	eps := make([]epochView, 2)
	for i, n := range []*server{a, c} {
		wg.Go(func() { eps[i] = n.runEpoch(t) })
	}
	wg.Wait()
	if eps[0].Epoch == eps[1].Epoch {
		t.Fatalf("two epochs asked at once share id %d", eps[0].Epoch)
	}
	lo, hi := eps[0], eps[1]
	if lo.Epoch > hi.Epoch {
		lo, hi = hi, lo
	}
	if after := readTransitKey(t, v, mount, key).Latest; after != before+2 || hi.RootVersion != after || lo.RootVersion != after-1 {
		t.Fatalf("root versions: %d before, %d after two epochs (%+v, %+v): want one rotation each", before, after, lo, hi)
	}
	checkShreddedView(t, c.getForget(t, f.Forget))

	// Erased once every node's cache has let go (the eviction, or the TTL).
	var erased forgetView
	deadline := time.Now().Add(hang)
	_ = deadline
	for {
		c.expect(t, http.StatusOK, http.MethodPost, "/v1/forgets/"+f.Forget+"/verify", nil).into(t, &erased)
		if erased.State == "erased" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the forget did not reach erased: %+v", erased)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var rp condition
	for _, c := range append(erased.Conditions, erased.Verification...) {
		if c.Name == "read_path_converged" {
			rp = c
		}
	}
	if !strings.Contains(rp.Reason, "every node (3)") {
		t.Fatalf("read_path_converged does not account for the three nodes: %+v", erased)
	}
	att := a.do(t, http.MethodGet, "/v1/forgets/"+f.Forget+"/attestation", nil)
	if att.Status != http.StatusOK {
		t.Fatalf("attestation through another node: %d %s", att.Status, att.Body)
	}
	attFile := filepath.Join(t.TempDir(), "attestation.json")
	if err := os.WriteFile(attFile, att.Body, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runShredd(t, "verify", attFile, "--key", filepath.Join(b.dataDir, node.AttestationPubFile),
		"--subject", "alice@example.com", "--salt", f.CommitmentSalt); code != 0 || !strings.Contains(stdout, "VERIFIED") {
		t.Fatalf("shredd verify of the cluster's attestation: %d\n%s%s", code, stdout, stderr)
	}

	// One log: a checkpoint of a before, one of c after, a consistency proof
	// from b between them, checked offline by shredd verify-consistency.
	cp2 := c.checkpoint(t)
	if cp2.size <= cp1.size {
		t.Fatalf("the log did not grow: %d then %d", cp1.size, cp2.size)
	}
	b.checkConsistency(t, cp1, cp2, filepath.Join(a.dataDir, node.LogVKeyFile))

	// Tokens: made beside one node, they hold on all; revoked, on none.
	out := cli(t, "", nil, nil, "token", "create", "--data-dir", a.dataDir, "--store", dsn, "--name", "writer", "--scopes", "encrypt").want(t, 0)
	tok := strings.TrimSpace(string(out.stdout))
	tokID := tokenID(t, string(out.stderr))
	write := func(n *server) int {
		r, err := n.callToken(http.MethodPost, "/v1/encrypt", tok, sealReq{Subject: "dave@example.com", Kind: "episodic", Plaintext: b64("d"), Context: b64("d")})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	for _, n := range nodes {
		if st := write(n); st != http.StatusOK {
			t.Fatalf("a token made beside node a, at %s: %d", n.name, st)
		}
	}
	cli(t, "", nil, nil, "token", "revoke", "--data-dir", c.dataDir, "--store", dsn, tokID).want(t, 0)
	// Every node caches a verified token for 2 s (docs/operations.md).
	deadline = time.Now().Add(hang)
	for _, n := range nodes {
		for write(n) != http.StatusUnauthorized {
			if time.Now().After(deadline) {
				t.Fatalf("a token revoked beside node c still works at %s", n.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// A node killed after committing a forget, before answering it: the
	// forget holds on the others, and the node resumes on restart.
	crashDir := b.dataDir
	b.stop()
	b2 := startServer(t, crashDir, opts2(opts(), "SHREDD_TEST_CRASH_AT=forget:committed"))
	if r, err := b2.call(http.MethodPost, "/v1/forget", map[string]string{"subject": "bob@example.com"}); err == nil && r.Status == http.StatusAccepted {
		t.Fatalf("the forget was answered before the crash point: %d", r.Status)
	}
	b2.waitKilled()
	for _, n := range []*server{a, c} {
		n.shredded(t, bob)
	}
	b3 := startServer(t, crashDir, opts())
	b3.shredded(t, bob)
	if fs := b3.listForgets(t, ""); len(fs) != 2 {
		t.Fatalf("%d forgets after the crash, want 2 (alice, bob)", len(fs))
	}

	// A node killed mid-epoch (after the rotation): another node resumes
	// that epoch, which completes once, with no second rotation.
	a.stop()
	a2 := startServer(t, a.dataDir, opts2(opts(), "SHREDD_TEST_CRASH_AT=epoch:rotated"))
	_, _ = a2.call(http.MethodPost, "/v1/epoch", nil)
	a2.waitKilled()
	c.runEpoch(t) // waits for the dead node's lock, then finds its epoch running
	checkEpochsOnce(t, dsn, readTransitKey(t, v, mount, key).Latest)
	for _, n := range []*server{b3, c} {
		n.checkNoRace()
	}
}

// checkEpochsOnce reads the epochs of the cluster's database: every one
// done, each rotating the root exactly once from where the one before left
// it, the last at Vault's latest version.
func checkEpochsOnce(t *testing.T, dsn string, latest int) {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn, postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(context.Background(), `SELECT id, state, from_version, to_version FROM epochs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	prev := 0
	n := 0
	for rows.Next() {
		var id, from, to int64
		var state string
		if err := rows.Scan(&id, &state, &from, &to); err != nil {
			t.Fatal(err)
		}
		n++
		if state != "done" || to != from+1 || (prev != 0 && int(from) != prev) {
			t.Fatalf("epoch %d: %s, versions %d -> %d after %d: want done, one rotation from where the last left", id, state, from, to, prev)
		}
		prev = int(to)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 3 || prev != latest {
		t.Fatalf("%d epochs ending at root version %d, Vault at %d", n, prev, latest)
	}
}

// tokenID reads the id out of shredd token create's message.
func tokenID(t *testing.T, msg string) string {
	t.Helper()
	_, rest, ok := strings.Cut(msg, "created token ")
	id, _, _ := strings.Cut(rest, " ")
	if !ok || id == "" {
		t.Fatalf("no token id in %q", msg)
	}
	return id
}

// opts2 is o with more environment.
func opts2(o serverOpts, env ...string) serverOpts {
	o.Env = append(append([]string{}, o.Env...), env...)
	return o
}

// checkpointView is a signed checkpoint of the log and its tree size.
type checkpointView struct {
	text []byte
	size int64
}

func (s *server) checkpoint(t *testing.T) checkpointView {
	t.Helper()
	r := s.expect(t, http.StatusOK, http.MethodGet, "/v1/log/checkpoint", nil)
	lines := strings.Split(string(r.Body), "\n")
	if len(lines) < 3 {
		t.Fatalf("checkpoint: %q", r.Body)
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		t.Fatalf("checkpoint size %q: %v", lines[1], err)
	}
	return checkpointView{text: r.Body, size: n}
}

// checkConsistency asks s for the consistency proof between two
// checkpoints (handed out by other nodes) and checks it with the log's
// verifier key: both signatures, and the proof from one root to the other.
func (s *server) checkConsistency(t *testing.T, old, new checkpointView, vkeyFile string) {
	t.Helper()
	v := logVerifier(t, vkeyFile)
	oc, err := translog.OpenCheckpoint(old.text, v)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := translog.OpenCheckpoint(new.text, v)
	if err != nil {
		t.Fatal(err)
	}
	r := s.expect(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/log/consistency?old=%d&new=%d", old.size, new.size), nil)
	p, err := translog.ParseConsistencyProof(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := translog.CheckConsistency(oc, nc, p.Hashes); err != nil {
		t.Fatalf("checkpoints of two nodes, proof of a third: %v", err)
	}
}

// TestPostgresRestoreDrill is the restore drill of docs/scale-out.md on a
// real PostgreSQL: a pg_dump taken before a forget and restored with
// pg_restore brings nobody back (the node's forget ledger commits the
// forget again at start-up), and a dump taken before an epoch is refused
// at start-up, not served as a database that opens no key.
func TestPostgresRestoreDrill(t *testing.T) {
	srv, dsn, dir, opts, a := startOnPostgres(t)
	alice := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice", "c")
	bob := a.seal(t, sealReq{Subject: "bob@example.com", Kind: "episodic"}, "bob", "c")
	beforeForget := pgDump(t, srv, dsn)
	a.forget(t, "alice@example.com")
	a.shredded(t, alice)
	a.stop()

	pgRestore(t, srv, dsn, beforeForget)
	b := startServer(t, dir, opts)
	if !strings.Contains(b.logs.String(), "committed them again") {
		t.Fatalf("the restored database's start did not re-apply the ledger's forget:\n%s", b.logs.String())
	}
	b.shredded(t, alice)
	b.open(t, bob)

	beforeEpoch := pgDump(t, srv, dsn)
	b.runEpoch(t)
	b.stop()
	pgRestore(t, srv, dsn, beforeEpoch)
	c := startProcess(t, dir, opts)
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		t.Fatal("a node on a dump older than the last epoch kept running")
	}
	if !strings.Contains(c.logs.String(), "backup taken before that epoch") {
		t.Fatalf("a dump older than the last epoch was not refused with its reason:\n%s", c.logs.String())
	}
	// The advice is PostgreSQL's, not SQLite's backup commands.
	if !strings.Contains(c.logs.String(), "Restore a dump (pg_dump") || strings.Contains(c.logs.String(), "shredd backup list") {
		t.Fatalf("the refusal of a dump older than the last epoch advises the wrong tools:\n%s", c.logs.String())
	}
}

// pgDump dumps the database of dsn (custom format) and returns the file.
func pgDump(t *testing.T, srv *pgtest.Server, dsn string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "shredd.dump")
	if b, err := exec.Command(srv.Bin("pg_dump"), "--format=custom", "--file="+out, "--dbname="+dsn).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, b)
	}
	return out
}

// pgRestore replaces the database of dsn with the dump.
func pgRestore(t *testing.T, srv *pgtest.Server, dsn, dump string) {
	t.Helper()
	if b, err := exec.Command(srv.Bin("pg_restore"), "--clean", "--if-exists", "--single-transaction", "--dbname="+dsn, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, b)
	}
}

// TestPostgresDown: a node whose PostgreSQL stops fails closed — 503 on
// writes, reads of keys and readiness — and serves again, without a
// restart, once the database is back.
func TestPostgresDown(t *testing.T) {
	srv, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dsn := srv.NewDatabase(t)
	a := startServer(t, t.TempDir(), serverOpts{Args: []string{"--store", dsn, "--cache-ttl", "1m"}})
	a.putKinds(t, "episodic")
	rec := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice", "c")
	a.open(t, rec) // alice's key is cached now

	// Each call fails after the store's bound (postgres.OpTimeout); a
	// decrypt of the subject being forgotten waits for the forget's own.
	a.client.Timeout = 3 * postgres.OpTimeout
	srv.Pause(t)
	var wg sync.WaitGroup
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/encrypt", sealReq{Subject: "bob@example.com", Kind: "episodic", Plaintext: b64("b"), Context: b64("c")}},
		{http.MethodPost, "/v1/decrypt", decryptReq(rec)},
		{http.MethodPost, "/v1/forget", map[string]string{"subject": "alice@example.com"}},
		{http.MethodGet, "/readyz", nil},
	} {
		wg.Go(func() {
			r, err := a.call(c.method, c.path, c.body)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Status != http.StatusServiceUnavailable {
				t.Errorf("%s %s with PostgreSQL down: %d %s, want 503", c.method, c.path, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	srv.Resume(t)
	deadline := time.Now().Add(hang)
	for {
		r, err := a.call(http.MethodPost, "/v1/decrypt", decryptReq(rec))
		if err == nil && r.Status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not serve again once PostgreSQL was back: %v %d %s", err, r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	a.seal(t, sealReq{Subject: "bob@example.com", Kind: "episodic"}, "bob", "c")
}
