package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/testkit/pgtest"
)

// clusterDB opens the cluster's database for a test to read what lives
// there (its rows, not what a node says of them).
func clusterDB(t *testing.T, dsn string) *storage.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func count(t *testing.T, db *storage.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// threeNodes starts three nodes on the PostgreSQL database dsn and one
// Vault key, with buckets (16 when 0) and extra flags.
func threeNodes(t *testing.T, dsn, key string, buckets int, extra ...string) []*server {
	v := newVault(t)
	o := vaultOpts(v, "transit", key, append([]string{"--store", dsn}, extra...)...)
	o.Buckets = buckets
	a := clusterNode(t, "", o)
	return []*server{a, clusterNode(t, a.dataDir, o), clusterNode(t, a.dataDir, o)}
}

// TestClusterForgetOnce: concurrent forgets of one subject through three
// nodes make one forget, whatever the interleaving: every answer carries
// the same id, and the database holds one row for the subject.
func TestClusterForgetOnce(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	nodes := threeNodes(t, dsn, "shredd-forget-once", 0, "--cache-ttl", "2s")
	db := clusterDB(t, dsn)
	nodes[0].putKinds(t, "episodic")
	const rounds, calls = 5, 6
	for round := range rounds {
		subject := fmt.Sprintf("once-%d@example.com", round)
		rec := nodes[round%3].seal(t, sealReq{Subject: subject, Kind: "episodic"}, "x", "c")
		ids := make([]string, calls)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				<-start
				n := nodes[i%len(nodes)]
				r, err := n.call(http.MethodPost, "/v1/forget", map[string]string{"subject": subject})
				if err != nil || r.Status != http.StatusAccepted {
					t.Errorf("round %d: forget through %s: %v %d %s", round, n.name, err, r.Status, r.Body)
					return
				}
				var f forgetView
				r.into(t, &f)
				ids[i] = f.Forget
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		for i, id := range ids {
			if id != ids[0] {
				t.Fatalf("round %d: %d concurrent forgets of one subject answered different forgets: %q", round, calls, ids)
			}
			_ = i
		}
		if n := count(t, db, `SELECT count(*) FROM forgets`); n != round+1 {
			t.Fatalf("round %d: %d forget rows for %d subjects forgotten", round, n, round+1)
		}
		for _, n := range nodes {
			n.shredded(t, rec)
			if f := n.getForget(t, ids[0]); f.State != "committed" && !shreddedOrLater(f.State) {
				t.Fatalf("round %d: forget %s on %s: %s", round, ids[0], n.name, f.State)
			}
		}
	}
}

// TestClusterEpochInterval: with forgets arriving all the time, three
// nodes run at most one background epoch per --epoch-interval between
// them (counted in the database), and the forgets still reach shredded.
func TestClusterEpochInterval(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	const interval = 2 * time.Second
	nodes := threeNodes(t, dsn, "shredd-epoch-interval", 512, "--cache-ttl", "2s", "--epoch-interval", interval.String())
	db := clusterDB(t, dsn)
	nodes[0].putKinds(t, "episodic")

	const window = 16 * time.Second
	from := time.Now()
	var last forgetView
	for i := 0; time.Since(from) < window; i++ {
		subject := fmt.Sprintf("interval-%d@example.com", i)
		last = nodes[i%3].forget(t, subject)
		time.Sleep(100 * time.Millisecond)
	}
	to := time.Now()
	rows, err := db.QueryContext(context.Background(), `SELECT started_at FROM epochs WHERE started_at >= ? AND started_at <= ? ORDER BY started_at`, from.UnixNano(), to.UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	for rows.Next() {
		var at int64
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		starts = append(starts, time.Unix(0, at))
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	n := len(starts)
	var gaps []string
	short := false
	for i := 1; i < n; i++ {
		gap := starts[i].Sub(starts[i-1])
		gaps = append(gaps, gap.Round(time.Millisecond).String())
		short = short || gap < interval
	}
	if most := int(window/interval) + 1; n > most || n == 0 || short {
		t.Fatalf("%d epochs in %s with --epoch-interval %s on 3 nodes (want 1..%d, each at least one interval after the last), started apart: %s",
			n, window, interval, most, strings.Join(gaps, " "))
	}
	nodes[1].waitForget(t, last.Forget, "shredded", func(f forgetView) bool { return shreddedOrLater(f.State) })
	t.Logf("%d epochs in %s (interval %s), started apart: %s", n, window, interval, strings.Join(gaps, " "))
}

// TestClusterPruneNodes: the row of a node killed for good leaves table
// nodes once it can no longer matter to any forget (its last heartbeat,
// the heartbeat slack and its cache TTL all passed), not before; a forget
// that counted it still reaches read_path_converged, and the live nodes
// keep their rows.
func TestClusterPruneNodes(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	const ttl = 3 * time.Second
	nodes := threeNodes(t, dsn, "shredd-prune-nodes", 0, "--cache-ttl", ttl.String())
	db := clusterDB(t, dsn)
	a, c := nodes[0], nodes[2]
	a.putKinds(t, "episodic")
	rec := a.seal(t, sealReq{Subject: "gone@example.com", Kind: "episodic"}, "x", "c")
	c.open(t, rec)                                         // c caches the key
	idOf := func(s *server) string { return nodeID(t, s) } // from its "node recorded" log line
	if n := count(t, db, `SELECT count(*) FROM nodes`); n != 3 {
		t.Fatalf("%d rows in nodes for 3 nodes", n)
	}
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.done
	var beat int64
	if err := db.QueryRowContext(context.Background(), `SELECT heartbeat_at FROM nodes WHERE id = ?`, idOf(c)).Scan(&beat); err != nil {
		t.Fatalf("the killed node's row: %v", err)
	}
	f := a.forget(t, "gone@example.com")
	// Its row may go once nothing it cached can live: heartbeat + the
	// heartbeat slack (2 s, keystore.Converged) + its TTL.
	mayGo := time.Unix(0, beat).Add(2*time.Second + ttl)
	deadline := time.Now().Add(hang)
	for count(t, db, `SELECT count(*) FROM nodes WHERE id = ?`, idOf(c)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the row of a node killed at %s is still in table nodes", time.Unix(0, beat).UTC().Format(time.RFC3339))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if gone := time.Now(); gone.Before(mayGo) {
		t.Fatalf("the killed node's row left at %s, before its cache TTL bound %s", gone.Format(time.RFC3339Nano), mayGo.Format(time.RFC3339Nano))
	}
	for _, s := range nodes[:2] {
		if n := count(t, db, `SELECT count(*) FROM nodes WHERE id = ?`, idOf(s)); n != 1 {
			t.Fatalf("%s: %d rows in nodes for a live node", s.name, n)
		}
	}
	a.runEpoch(t)
	var v forgetView
	waitFor(t, "read_path_converged", func() bool {
		a.expect(t, http.StatusOK, http.MethodPost, "/v1/forgets/"+f.Forget+"/verify", nil).into(t, &v)
		for _, c := range v.Verification {
			if c.Name == "read_path_converged" {
				return c.Status == "ok"
			}
		}
		return false
	})
}

// TestClusterPostgresFreeze: PostgreSQL frozen (SIGSTOP) for 10 s under
// encrypts and decrypts through three nodes. Every request is answered
// within the store timeout (+ a small margin): 503 backend_unavailable
// while the database is frozen, never a late 200; /readyz answers 503;
// and once PostgreSQL is continued every node serves again without a
// restart. The cluster has a PostgreSQL server of its own: freezing the
// shared one would stall other tests.
func TestClusterPostgresFreeze(t *testing.T) {
	srv, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	dsn := srv.NewDatabase(t)
	const storeTimeout, margin, freeze = 3 * time.Second, 2 * time.Second, 10 * time.Second
	nodes := threeNodes(t, dsn, "shredd-pg-freeze", 0, "--cache-ttl", "1m", "--store-timeout", storeTimeout.String())
	nodes[0].putKinds(t, "episodic")
	var recs []record
	for i, n := range nodes {
		rec := n.seal(t, sealReq{Subject: fmt.Sprintf("freeze-%d@example.com", i), Kind: "episodic"}, "x", "c")
		recs = append(recs, rec)
		for _, m := range nodes {
			m.open(t, rec) // every node caches every key: the database is what they wait for
		}
	}
	type answer struct {
		start, end time.Time
		status     int
		what       string
	}
	var mu sync.Mutex
	var answers []answer
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		n := nodes[w%3]
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				what, path, body := "decrypt", "/v1/decrypt", any(decryptReq(recs[i%len(recs)]))
				if (w+i)%2 == 0 {
					what, path = "encrypt", "/v1/encrypt"
					// Fresh data, in the write unit: the worker's decrypts
					// (decryptReq, the check unit) are no reads it derives from.
					body = sealReq{Subject: fmt.Sprintf("freeze-%d@example.com", i%3), Kind: "episodic", Plaintext: b64("y"), Context: b64("c"), Unit: writeUnit}
				}
				start := time.Now()
				r, err := n.call(http.MethodPost, path, body)
				a := answer{start: start, end: time.Now(), status: r.Status, what: what + " through " + n.name}
				if err != nil {
					a.status = -1
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(2 * time.Second)
	srv.Pause(t)
	frozen := time.Now() // every process of the server stopped: nothing started after this can commit
	time.Sleep(storeTimeout + margin)
	for _, n := range nodes {
		if r, err := n.callToken(http.MethodGet, "/readyz", "-", nil); err != nil || r.Status != http.StatusServiceUnavailable {
			t.Errorf("GET /readyz of %s with PostgreSQL frozen: %v %d %s, want 503", n.name, err, r.Status, r.Body)
		}
	}
	time.Sleep(freeze - time.Since(frozen))
	continued := time.Now()
	srv.Resume(t)
	// Every node serves again, without a restart.
	for _, n := range nodes {
		waitFor(t, n.name+" serving again", func() bool {
			r, err := n.call(http.MethodPost, "/v1/decrypt", decryptReq(recs[0]))
			return err == nil && r.Status == http.StatusOK
		})
		n.seal(t, sealReq{Subject: "after@example.com", Kind: "episodic"}, "z", "c")
		if r, err := n.callToken(http.MethodGet, "/readyz", "-", nil); err != nil || r.Status != http.StatusOK {
			t.Errorf("GET /readyz of %s after PostgreSQL continued: %v %d", n.name, err, r.Status)
		}
	}
	close(stop)
	wg.Wait()

	unavailable, late := 0, 0
	var slowest time.Duration
	for _, a := range answers {
		took := a.end.Sub(a.start)
		slowest = max(slowest, took)
		switch {
		case a.status != http.StatusOK && a.status != http.StatusServiceUnavailable:
			t.Errorf("%s at %s: status %d, want 200 or 503", a.what, a.start.Sub(frozen).Round(time.Millisecond), a.status)
		case took > storeTimeout+margin:
			late++
			t.Errorf("%s started %s after the freeze: answered %d after %s, beyond the store timeout %s (+%s)",
				a.what, a.start.Sub(frozen).Round(time.Millisecond), a.status, took.Round(time.Millisecond), storeTimeout, margin)
		case a.status == http.StatusOK && a.start.After(frozen) && a.end.Before(continued):
			t.Errorf("%s started %s after the freeze: 200 while PostgreSQL was frozen", a.what, a.start.Sub(frozen).Round(time.Millisecond))
		case a.status == http.StatusServiceUnavailable:
			unavailable++
		}
	}
	if unavailable == 0 {
		t.Errorf("no 503 in %d answers while PostgreSQL was frozen %s", len(answers), freeze)
	}
	t.Logf("%d answers, %d of them 503, %d late; the slowest took %s", len(answers), unavailable, late, slowest.Round(time.Millisecond))
}
