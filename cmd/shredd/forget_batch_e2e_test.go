package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/testkit/pgtest"
)

// TestForgetGroupStatements: the forgets that wait together for the write
// lock on PostgreSQL commit in a fixed number of statements per group, not
// a number per forget (the group's transaction holds the cluster-wide write
// lock, and each statement is a round trip that everything queued waits
// for). Statement-level triggers count the INSERT statements on forgets,
// subjects and evictions while a test transaction holds the write lock and
// n forgets of subjects with keys queue behind it: a statement per forget
// and table gave 2n (a forget row and an eviction each; the subjects rows
// are updated), a group's statements are 2 per group. The forgets still
// commit, one row each, and the other node's key cache lets go of every
// subject of the group (one notification carries the group's evictions).
func TestForgetGroupStatements(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	v := newVault(t)
	o := vaultOpts(v, "transit", "shredd-batch", "--store", dsn, "--cache-ttl", "30s")
	a := clusterNode(t, "", o)
	b := clusterNode(t, a.dataDir, o)
	a.putKinds(t, "episodic")

	const n = 24
	subjects := make([]string, n)
	recs := make([]record, n)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("batch-%d@example.com", i)
		recs[i] = a.seal(t, sealReq{Subject: subjects[i], Kind: "episodic"}, "record of "+subjects[i], "m")
		b.open(t, recs[i]) // node b caches the key
	}

	db, err := postgres.Open(ctx, dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE batch_stmts(tbl TEXT NOT NULL)`,
		`CREATE FUNCTION batch_count() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN INSERT INTO batch_stmts VALUES (TG_TABLE_NAME); RETURN NULL; END $$`,
		`CREATE TRIGGER batch_count AFTER INSERT ON forgets FOR EACH STATEMENT EXECUTE FUNCTION batch_count()`,
		`CREATE TRIGGER batch_count AFTER INSERT ON subjects FOR EACH STATEMENT EXECUTE FUNCTION batch_count()`,
		`CREATE TRIGGER batch_count AFTER INSERT ON evictions FOR EACH STATEMENT EXECUTE FUNCTION batch_count()`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// A transaction of the test's own holds the write lock (a write
	// transaction that declares nothing takes it alone) while the forgets
	// arrive: the first group waits for it, the others queue behind.
	hold, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, subject := range subjects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := a.call(http.MethodPost, "/v1/forget", map[string]string{"subject": subject})
			switch {
			case err != nil:
				errs[i] = err
			case r.Status != http.StatusAccepted:
				errs[i] = fmt.Errorf("status %d: %s", r.Status, r.Body)
			default:
				var f forgetView
				r.into(t, &f)
				ids[i] = f.Forget
			}
		}()
	}
	waitLockWaiter(t, db)
	time.Sleep(time.Second) // the other requests reach the queue (loopback)
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("forget %s: %v", subjects[i], err)
		}
	}

	for i, id := range ids {
		if f := a.getForget(t, id); f.CommittedAt == nil {
			t.Errorf("forget %s is %s, not committed", subjects[i], f.State)
		}
		b.expect(t, http.StatusGone, http.MethodPost, "/v1/decrypt", decryptReq(recs[i]))
	}
	var forgets, evictions int
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM forgets), (SELECT count(*) FROM evictions)`).Scan(&forgets, &evictions); err != nil {
		t.Fatal(err)
	}
	if forgets != n || evictions != n {
		t.Errorf("%d forget rows and %d evictions for %d forgets", forgets, evictions, n)
	}
	var stmts int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM batch_stmts`).Scan(&stmts); err != nil {
		t.Fatal(err)
	}
	// Two groups (the one that waited for the lock, then the rest) take 4;
	// n is far above what requests trickling in one at a time could add.
	if stmts >= n {
		t.Errorf("%d INSERT statements on forgets, subjects and evictions for %d forgets that queued together, want a few per group (2 per forget before)", stmts, n)
	}
	t.Logf("%d INSERT statements for %d forgets", stmts, n)

	// Node b applied the group's evictions one by one (not a purge of its
	// whole cache for a payload it cannot read): it records the newest.
	deadline := time.Now().Add(hang)
	for {
		var behind int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM nodes WHERE evicted_through < (SELECT max(seq) FROM evictions)`).Scan(&behind); err != nil {
			t.Fatal(err)
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes have not applied the group's evictions", behind)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLockWaiter waits until a transaction waits for an advisory lock: a
// forget group blocked behind the test's transaction.
func waitLockWaiter(t *testing.T, db *storage.DB) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		var waiting int
		if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype='advisory' AND NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no forget waits for the write lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
