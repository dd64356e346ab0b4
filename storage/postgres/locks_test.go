package postgres_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/testkit/pgtest"
)

// TestShardLocks checks the locks by what is touched on a real PostgreSQL
// (storage.TxOptions): transactions that declare different shards, or
// share one, are inside at the same time (both begun, neither committed);
// two that take one shard exclusively, a declaring one against one that
// declares nothing, and two declaring ones that both take the sequence
// lock (storage.Tx.Sequence), are serialised, the later one seen waiting
// in pg_locks until the earlier one commits.
func TestShardLocks(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	watch, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()

	undeclared := func(ctx context.Context) (*storage.Tx, error) { return db.BeginTx(ctx, nil) }
	touching := func(o storage.TxOptions) func(context.Context) (*storage.Tx, error) {
		return func(ctx context.Context) (*storage.Tx, error) { return db.BeginTouching(ctx, o) }
	}
	shared := func(shards ...int) func(context.Context) (*storage.Tx, error) {
		return touching(storage.TxOptions{Shards: shards})
	}
	own := func(shards ...int) func(context.Context) (*storage.Tx, error) {
		return touching(storage.TxOptions{Shards: shards, Exclusive: true})
	}
	type begin = func(context.Context) (*storage.Tx, error)
	// seq begins with b, then takes the sequence lock (twice: it is
	// idempotent).
	seq := func(b begin) begin {
		return func(ctx context.Context) (*storage.Tx, error) {
			tx, err := b(ctx)
			if err != nil {
				return nil, err
			}
			for range 2 {
				if err := tx.Sequence(ctx); err != nil {
					tx.Rollback()
					return nil, err
				}
			}
			return tx, nil
		}
	}

	for _, tc := range []struct {
		name          string
		first, second begin
		overlap       bool
	}{
		{"different shards, exclusive", own(1, 7), own(2, 200), true},
		{"different shards, shared", shared(1), shared(2), true},
		{"one shard, both shared", shared(5, 9), shared(9), true},
		{"one shard, exclusive", own(3, 5), own(5), false},
		{"one shard, exclusive after shared", shared(5), own(5, 250), false},
		{"undeclared after declaring", shared(1), undeclared, false},
		{"declaring after undeclared", undeclared, own(3), false},
		{"shared after undeclared", undeclared, shared(4), false},
		{"undeclared after undeclared", undeclared, undeclared, false},
		{"sequenced, different shards", seq(own(1)), seq(own(2)), false},
		{"sequenced, shared shard", seq(shared(6)), seq(shared(6)), false},
		{"one of two sequenced", seq(own(1)), own(2), true},
		{"sequenced after one of two", own(1), seq(own(2)), true},
		{"undeclared sequenced, then declaring", seq(undeclared), shared(3), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.first(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Rollback()
			got := make(chan error, 1)
			var b *storage.Tx
			bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			go func() {
				var err error
				b, err = tc.second(bctx)
				got <- err
			}()
			if tc.overlap {
				// Both inside before either commits: the second begins
				// while the first is open.
				if err := <-got; err != nil {
					t.Fatalf("the second transaction could not begin while the first was open: %v", err)
				}
				if n := pgtest.AdvisoryWaiters(t, watch); n != 0 {
					t.Fatalf("%d advisory locks waiting with both transactions inside", n)
				}
				if err := a.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := b.Commit(); err != nil {
					t.Fatal(err)
				}
				return
			}
			// The second waits in the database for the first's lock.
			pgtest.AwaitLockWait(t, watch, "the second transaction", got)
			if err := a.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the second transaction did not begin after the first committed: %v", err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("shard out of range", func(t *testing.T) {
		for _, sh := range []int{-1, storage.Shards} {
			tx, err := db.BeginTouching(ctx, storage.TxOptions{Shards: []int{0, sh}})
			if err == nil {
				tx.Rollback()
				t.Fatalf("shard %d: began", sh)
			}
		}
	})
}
