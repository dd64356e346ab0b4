package pgtest

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// RowQuerier is what the lock helpers read pg_locks through: a *sql.DB,
// or a *storage.DB on PostgreSQL.
type RowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// AdvisoryWaiters counts the advisory locks of q's database that a session
// waits for.
func AdvisoryWaiters(t testing.TB, q RowQuerier) int {
	t.Helper()
	var n int
	if err := q.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// AwaitLockWait returns once a session of q's database waits for an
// advisory lock: the work of done (which sends its outcome when it ends),
// held by a lock the test holds. It fails t when done ends first (the
// work did not wait for the lock) or when nothing waits within 15 s.
func AwaitLockWait(t testing.TB, q RowQuerier, what string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for AdvisoryWaiters(t, q) == 0 {
		select {
		case err := <-done:
			t.Fatalf("%s ended while the test held the lock it must wait for (err %v)", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is neither waiting for a lock nor done", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("%s ended while the test held the lock it must wait for (err %v)", what, err)
	default:
	}
}

// AwaitBlockedBy checks that the work of done waits in q's database for a
// lock of holder, a transaction the test holds (AwaitLockWait), then
// commits holder and checks that the work ends without error.
func AwaitBlockedBy(t testing.TB, q RowQuerier, what string, holder interface{ Commit() error }, done <-chan error) {
	t.Helper()
	AwaitLockWait(t, q, what, done)
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("%s, once the lock it waited for was free: %v", what, err)
	}
}
