package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd/storage/sqlite"
)

// TestWriteGate checks the write gate of a database file through real
// SQLite connections: one write transaction or autocommit write at a time
// per file, readers never held up, a waiter leaving when its context ends,
// and every writer served once the holder commits or rolls back.
func TestWriteGate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gate.db")
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	// A second handle on the same file shares the gate.
	db2, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()

	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, `INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	// Readers go on, and see the last commit only.
	var n int
	if err := db2.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("reader during a write: %d, %v", n, err)
	}
	// A writer whose context ends leaves the queue with its context's error.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := db2.BeginTx(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("begin behind a held gate: %v, want the context's deadline", err)
	}
	if _, err := db2.ExecContext(short, `INSERT INTO t VALUES (9)`); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("autocommit write behind a held gate: %v, want the context's deadline", err)
	}

	// Writers queued behind the holder all get their turn once it commits.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				_, err := db2.ExecContext(ctx, `INSERT INTO t VALUES (?)`, 100+i)
				errs <- err
				return
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (?)`, 100+i); err != nil {
				tx.Rollback()
				errs <- err
				return
			}
			if i%4 == 1 {
				errs <- tx.Rollback() // a rollback releases the gate too
				return
			}
			errs <- tx.Commit()
		}()
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// 1 (the holder) + 10 autocommits + 5 committed transactions.
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 16 {
		t.Fatalf("rows after the queue: %d, %v, want 16", n, err)
	}
}
