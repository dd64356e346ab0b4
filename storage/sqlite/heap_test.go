package sqlite_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
)

// TestHeapLimit: SQLite's heap stays near HeapLimitKiB however many
// connections read pages nobody reads again. A table of 16 MiB is read
// through by MaxConns connections at once, each of which could cache all
// of it (CacheKiB): 128 MiB of caches without the limit. With a limit of
// 4 MiB the heap stays under twice it; with none (the same reads), it
// passes 32 MiB, so the check can fail.
func TestHeapLimit(t *testing.T) {
	const limitKiB = 4 << 10
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "heap.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fill(t, db, 16<<20)

	undo := sqlite.SetHeapLimitBase(0)
	readAll(t, db)
	if used := sqlite.MemoryUsed(); used < 32<<20 {
		t.Fatalf("without a limit, SQLite's heap is %d MiB after %d connections read 16 MiB: the reads do not fill the caches", used>>20, sqlite.MaxConns)
	}
	undo()
	// A connection keeps the cache it has: start again, with the limit
	// set before the first page is read, as shredd serve does.
	db.Close()
	defer sqlite.SetHeapLimitBase(limitKiB)()
	db, err = sqlite.Open(filepath.Join(t.TempDir(), "heap2.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fill(t, db, 16<<20)
	if got := sqlite.HeapLimitSet(); got != limitKiB<<10 {
		t.Fatalf("soft heap limit %d, want %d", got, limitKiB<<10)
	}
	readAll(t, db)
	if used := sqlite.MemoryUsed(); used > 2*limitKiB<<10 {
		t.Errorf("SQLite's heap is %d KiB after %d connections read 16 MiB, over twice the limit of %d KiB", used>>10, sqlite.MaxConns, limitKiB)
	}

	// A bulk load with a larger cache raises the limit while it runs.
	err = db.Bulk(ctx, storage.BulkOptions{CacheKiB: 64 << 10}, func(*storage.Tx) error {
		if got := sqlite.HeapLimitSet(); got != (limitKiB+64<<10)<<10 {
			t.Errorf("during the bulk load the limit is %d, want %d", got, (limitKiB+64<<10)<<10)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := sqlite.HeapLimitSet(); got != limitKiB<<10 {
		t.Errorf("after the bulk load the limit is %d, want %d", got, limitKiB<<10)
	}
}

// fill writes n bytes of random 1,000-byte rows into a table t.
func fill(t *testing.T, db *storage.DB, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)`); err != nil {
		t.Fatal(err)
	}
	err := db.Bulk(ctx, storage.BulkOptions{NoSync: true}, func(tx *storage.Tx) error {
		row := make([]byte, 1000)
		for i := 0; i < n/len(row); i++ {
			rand.Read(row)
			if _, err := tx.ExecContext(ctx, `INSERT INTO t (b) VALUES (?)`, row); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readAll reads every row of t on MaxConns connections at once: each
// query holds its own connection until all have started.
func readAll(t *testing.T, db *storage.DB) {
	t.Helper()
	ctx := context.Background()
	var started, done sync.WaitGroup
	started.Add(sqlite.MaxConns)
	errs := make(chan error, sqlite.MaxConns)
	for range sqlite.MaxConns {
		done.Go(func() {
			rows, err := db.QueryContext(ctx, `SELECT b FROM t ORDER BY id`)
			started.Done()
			if err != nil {
				errs <- err
				return
			}
			defer rows.Close()
			started.Wait()
			for rows.Next() {
				var b []byte
				if err := rows.Scan(&b); err != nil {
					errs <- err
					return
				}
			}
			errs <- rows.Err()
		})
	}
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
