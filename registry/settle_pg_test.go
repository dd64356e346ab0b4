package registry

import (
	"bytes"
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/shredd/shredd/derivation"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/testkit/pgtest"
)

// TestSettleBesideRegistrations settles staged lineage on a real PostgreSQL
// while a registration commits beside it (a declaring transaction, as the
// group writers of every node run them): the settle's chunk is held
// between its reads and its writes (another session holds an uncommitted
// lineage row that the chunk must insert, so its insert waits), the
// registration commits staged rows under the chunk's bound meanwhile, and
// then the settle goes on. Every row must end up in lineage exactly once:
// none deleted from the staging table without being moved.
func TestSettleBesideRegistrations(t *testing.T) {
	srv := pgtest.Shared(t)
	t.Cleanup(pgtest.Cleanup)
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(4)

	id := func(b byte) []byte { return bytes.Repeat([]byte{b}, 16) }
	sid := bytes.Repeat([]byte{7}, 32)
	for _, a := range []byte{1, 3} {
		if _, err := raw.Exec(`INSERT INTO lineage_staged(artifact, sid, gen, direct) VALUES ($1, $2, 1, true)`, id(a), sid); err != nil {
			t.Fatal(err)
		}
	}
	// The session that holds the chunk: an uncommitted row of lineage
	// with the key the chunk inserts first.
	hold, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.Exec(`INSERT INTO lineage(sid, artifact, gen, direct) VALUES ($1, $2, 1, true)`, sid, id(1)); err != nil {
		t.Fatal(err)
	}

	s := &Registry{db: db, graph: derivation.New(db)}
	settled := make(chan error, 1)
	go func() { settled <- s.Settle(ctx) }()
	waitLockWait(t, raw)

	// A registration commits beside the settle: rows under its bound.
	reg, err := db.BeginTouching(ctx, storage.TxOptions{Shards: []int{1}})
	if err != nil {
		t.Fatalf("a registration could not begin beside the settle: %v", err)
	}
	if _, err := reg.ExecContext(ctx, `INSERT INTO lineage_staged(artifact, sid, gen, direct) VALUES (?, ?, 1, true)`, id(2), sid); err != nil {
		t.Fatal(err)
	}
	if err := reg.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx); err != nil { // what the first one left staged
		t.Fatal(err)
	}
	for _, a := range []byte{1, 2, 3} {
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM lineage WHERE sid = $1 AND artifact = $2`, sid, id(a)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("artifact %d: %d lineage rows after the settles, want 1", a, n)
		}
	}
	var staged int
	if err := raw.QueryRow(`SELECT count(*) FROM lineage_staged`).Scan(&staged); err != nil {
		t.Fatal(err)
	}
	if staged != 0 {
		t.Errorf("%d rows still staged", staged)
	}
}

// waitLockWait waits until a session of the database waits for a lock
// (the settle's insert behind the held row).
func waitLockWait(t *testing.T, raw interface {
	QueryRow(string, ...any) *sql.Row
}) {
	t.Helper()
	// A bound that only catches a hang, even on a loaded machine.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND wait_event = 'transactionid'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the settle never waited for the held row")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
