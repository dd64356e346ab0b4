package keystore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/testkit/pgtest"
)

// storeEnv names the backend of the tests that run on either engine, as
// shreddtest.StoreEnv does for the packages built on shreddtest: "sqlite"
// (the default) or "postgres".
const storeEnv = "SHREDD_TEST_STORE"

// onPostgres reports whether storeEnv asks for PostgreSQL.
func onPostgres() bool { return os.Getenv(storeEnv) == "postgres" }

// envDB opens a new, empty database of the backend storeEnv names: a
// SQLite file in dir, or a database of its own on the test binary's
// PostgreSQL server (pgtest.Shared).
func envDB(t *testing.T, dir string) *storage.DB {
	t.Helper()
	var db *storage.DB
	var err error
	if onPostgres() {
		db, err = postgres.Open(context.Background(), pgtest.Shared(t).NewDatabase(t), postgres.Options{})
	} else {
		db, err = sqlite.Open(filepath.Join(dir, "shredd.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestRekeyGroupStatements: on PostgreSQL, a group re-key of n buckets with
// live keys updates the buckets and subjects tables in a fixed number of
// statements, whatever n: one for the next keys, one for the subject keys
// rewrapped, one for the switch. A statement per bucket and per key made
// the background re-key cost several round trips per forget. Statement-
// level triggers count the UPDATE statements of each table; every key
// still opens afterwards, every bucket is at its next generation.
func TestRekeyGroupStatements(t *testing.T) {
	if !onPostgres() {
		t.Skipf("statement-level triggers need PostgreSQL (%s=postgres)", storeEnv)
	}
	ctx := context.Background()
	counts := map[int]map[string]int{}
	for _, n := range []int{2, 8, 40} {
		t.Run(fmt.Sprint(n, " buckets"), func(t *testing.T) {
			dir := t.TempDir()
			db := envDB(t, dir)
			s, err := keystore.Open(ctx, db, localRoot(t, dir), keystore.Options{Buckets: 64})
			if err != nil {
				t.Fatal(err)
			}
			keys := createKeys(t, s, "subject-", 192) // about 3 a bucket: one group
			var gone []envelope.SID
			var bs []int
			seen := map[int]bool{}
			for i := 0; len(bs) < n; i++ {
				id := sid(fmt.Sprint("subject-", i))
				if b := s.BucketOf(id); !seen[b] {
					seen[b] = true
					delete(keys, id)
					destroy(t, s, db, id)
					gone, bs = append(gone, id), append(bs, b)
				}
			}
			for _, q := range []string{
				`CREATE TABLE rekey_stmts(tbl TEXT NOT NULL)`,
				`CREATE FUNCTION rekey_count() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN INSERT INTO rekey_stmts VALUES (TG_TABLE_NAME); RETURN NULL; END $$`,
				`CREATE TRIGGER rekey_count AFTER UPDATE ON buckets FOR EACH STATEMENT EXECUTE FUNCTION rekey_count()`,
				`CREATE TRIGGER rekey_count AFTER UPDATE ON subjects FOR EACH STATEMENT EXECUTE FUNCTION rekey_count()`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			markers, err := keystore.NewShredder(s).RekeyBuckets(ctx, bs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(markers) != n {
				t.Fatalf("%d buckets re-keyed, want %d", len(markers), n)
			}
			counts[n] = countStatements(t, db)
			t.Logf("%d buckets: UPDATE statements %v", n, counts[n])
			if counts[n]["buckets"] != 2 || counts[n]["subjects"] != 1 {
				t.Errorf("%d buckets re-keyed in %d UPDATEs of buckets and %d of subjects, want 2 and 1",
					n, counts[n]["buckets"], counts[n]["subjects"])
			}
			checkGens(t, db, bs)
			checkMany(t, s, keys, gone)
			checkMany(t, reopen(t, dir, db), keys, gone)
		})
	}
}

// countStatements returns the statements rekey_count counted, by table.
func countStatements(t *testing.T, db *storage.DB) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT tbl, count(*) FROM rekey_stmts GROUP BY tbl`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var tbl string
		var n int
		if err := rows.Scan(&tbl, &n); err != nil {
			t.Fatal(err)
		}
		out[tbl] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
