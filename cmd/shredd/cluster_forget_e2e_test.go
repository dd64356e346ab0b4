package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

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
