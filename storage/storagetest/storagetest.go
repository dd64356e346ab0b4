// Package storagetest is the conformance suite every storage backend passes
// (tests only): the schema of this release, transactions, the write lock,
// the portable SQL forms shredd's packages use, and the DB's maintenance
// calls.
package storagetest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shredd/shredd/storage"
)

// Sub is the folder dir of fsys, for Backend.Migrations: a backend's
// embedded migrations, as its tests hand them to the suite. It panics when
// dir is not a valid path.
func Sub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// Tables returns the tables and views that the migrations in fsys (a
// backend's NNNN_name.sql files, at its top) create and leave, sorted:
// every CREATE TABLE and CREATE VIEW of the files in order, less those a
// later DROP removes, with ALTER TABLE ... RENAME TO followed. The table
// migrations (storage.MigrationsTable) is the migrator's, not theirs. The
// suite derives its list from the files so that a table or view a new
// migration adds cannot escape it.
func Tables(fsys fs.FS) ([]string, error) {
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("storagetest: no migration files")
	}
	sort.Strings(files)
	have := map[string]bool{}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		for _, m := range schemaStmt.FindAllStringSubmatch(stripComments(string(b)), -1) {
			verb, name, to := strings.ToUpper(m[1]), unquote(m[3]), unquote(m[4])
			switch {
			case verb == "CREATE":
				have[name] = true
			case verb == "DROP":
				delete(have, name)
			case to != "": // ALTER TABLE name RENAME TO to
				if have[name] {
					delete(have, name)
					have[to] = true
				}
			}
		}
	}
	names := make([]string, 0, len(have))
	for n := range have {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// schemaStmt matches the statements that make or remove a table or view:
// the verb, the object type, its name and, for a rename, the new name.
var schemaStmt = regexp.MustCompile(`(?is)\b(CREATE|DROP|ALTER)\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+|TEMPORARY\s+|UNLOGGED\s+|MATERIALIZED\s+)?(TABLE|VIEW)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?("?[a-z_][a-z0-9_]*"?)(?:\s+RENAME\s+TO\s+("?[a-z_][a-z0-9_]*"?))?`)

// stripComments removes the SQL comments (-- to the end of the line, and
// /* ... */) of s, so that a comment that names a statement is not one.
func stripComments(s string) string {
	s = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(s, " ")
	return regexp.MustCompile(`--[^\n]*`).ReplaceAllString(s, " ")
}

func unquote(name string) string { return strings.ToLower(strings.Trim(name, `"`)) }

// Backend opens the databases of one backend for the suite.
type Backend struct {
	// Migrations are the backend's migration files (NNNN_name.sql, at the
	// top of the file system), as it embeds them: the suite's list of
	// tables and views comes from them (Tables).
	Migrations fs.FS
	// Open opens the database called name, creating it empty the first
	// time; opening the same name again (after Close) opens the same data.
	Open func(t *testing.T, name string) *storage.DB
}

// Run runs the conformance suite against b.
func Run(t *testing.T, b Backend) {
	t.Run("Schema", func(t *testing.T) { testSchema(t, b) })
	t.Run("SchemaCheck", func(t *testing.T) { testSchemaCheck(t, b) })
	t.Run("Values", func(t *testing.T) { testValues(t, b) })
	t.Run("Transactions", func(t *testing.T) { testTransactions(t, b) })
	t.Run("ConcurrentWriters", func(t *testing.T) { testConcurrentWriters(t, b) })
	t.Run("Upserts", func(t *testing.T) { testUpserts(t, b) })
	t.Run("Bulk", func(t *testing.T) { testBulk(t, b) })
	t.Run("Maintenance", func(t *testing.T) { testMaintenance(t, b) })
	t.Run("Reopen", func(t *testing.T) { testReopen(t, b) })
	t.Run("SecretPins", func(t *testing.T) { testSecretPins(t, b) })
	t.Run("Cluster", func(t *testing.T) { testCluster(t, b) })
}

// openScratch opens the database name of b with the suite's table
// (scratch), closed when the test ends.
func openScratch(t *testing.T, b Backend, name string) *storage.DB {
	t.Helper()
	db := b.Open(t, name)
	t.Cleanup(func() { db.Close() })
	scratch(t, db)
	return db
}

// scratch creates a table of the suite's own in db.
func scratch(t *testing.T, db *storage.DB) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), `CREATE TABLE scratch (
		k TEXT PRIMARY KEY,
		n BIGINT NOT NULL,
		b BYTEA,
		s TEXT)`); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, q storage.Querier, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := q.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// catalog lists the tables and views of the database in each engine's
// dialect.
var catalog = map[string]string{
	"sqlite":   `SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'`,
	"postgres": `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`,
}

// testSchema: a migrated database has every table and view of the
// backend's migrations (Tables), and no other but the migrator's own;
// each answers a query; and the migrations are recorded one row each.
func testSchema(t *testing.T, b Backend) {
	if b.Migrations == nil {
		t.Fatal("the backend gives no migration files (Backend.Migrations)")
	}
	tables, err := Tables(b.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	db := b.Open(t, "schema")
	defer db.Close()
	q, ok := catalog[db.Engine().Name()]
	if !ok {
		t.Fatalf("no catalog query for engine %s", db.Engine().Name())
	}
	have, err := storage.Column[string](context.Background(), db, q)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(have)
	want := append([]string{"migrations"}, tables...)
	sort.Strings(want)
	if strings.Join(have, " ") != strings.Join(want, " ") {
		t.Fatalf("the database has the tables and views\n\t%s\nthe migrations create\n\t%s", strings.Join(have, " "), strings.Join(want, " "))
	}
	for _, tb := range want {
		count(t, db, `SELECT count(*) FROM `+tb)
	}
	var v int64
	if err := db.QueryRowContext(context.Background(), `SELECT max(version) FROM migrations`).Scan(&v); err != nil || v < 1 {
		t.Fatalf("migrations recorded: %d, %v; want at least one", v, err)
	}
	if n := count(t, db, `SELECT count(*) FROM migrations`); n != v {
		t.Fatalf("%d migrations recorded, newest %d: want one row per version", n, v)
	}
}

// keepKeysTrigger is route 2 of issue 23 in each engine's dialect: a
// trigger that silently ignores every update of a subject's wrapped key,
// so that a forget "destroys" a key that stays.
var keepKeysTrigger = map[string][]string{
	"sqlite": {`CREATE TRIGGER keep_keys BEFORE UPDATE OF wrapped ON subjects BEGIN SELECT RAISE(IGNORE); END`},
	"postgres": {
		`CREATE FUNCTION keep_keys() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`,
		`CREATE TRIGGER keep_keys BEFORE UPDATE OF wrapped ON subjects FOR EACH ROW EXECUTE FUNCTION keep_keys()`,
	},
}

// testSchemaCheck: a database just migrated passes DB.CheckSchema, and one
// object added or changed outside the migrations (the trigger of
// keepKeysTrigger, an index, a column, a view) fails it with
// storage.ErrSchemaAltered naming the object.
func testSchemaCheck(t *testing.T, b Backend) {
	ctx := context.Background()
	db := b.Open(t, "schemacheck")
	if err := db.CheckSchema(ctx); err != nil {
		t.Fatalf("a freshly migrated database: %v", err)
	}
	db.Close()
	trigger, ok := keepKeysTrigger[db.Engine().Name()]
	if !ok {
		t.Fatalf("no trigger for engine %s", db.Engine().Name())
	}
	for _, c := range []struct {
		name  string
		stmts []string
		want  string
	}{
		{"trigger", trigger, "extra trigger keep_keys on subjects"},
		{"index", []string{`CREATE INDEX forgets_extra ON forgets(state, sid)`}, "forgets_extra"},
		{"column", []string{`ALTER TABLE kinds ADD COLUMN note TEXT`}, "kinds"},
		{"view", []string{`CREATE VIEW subjects_all AS SELECT sid FROM subjects`}, "subjects_all"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := b.Open(t, "schemacheck-"+c.name)
			defer db.Close()
			for _, q := range c.stmts {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			err := db.CheckSchema(ctx)
			if !errors.Is(err, storage.ErrSchemaAltered) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckSchema after %s: %v, want ErrSchemaAltered naming %q", c.name, err, c.want)
			}
		})
	}
}

// testValues: the values shredd stores come back as they went in, with
// placeholders bound in order.
func testValues(t *testing.T, b Backend) {
	ctx := context.Background()
	db := openScratch(t, b, "values")
	blob := []byte{0, 1, 0xff, 0, 'x'}
	big := int64(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	if _, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n, b, s) VALUES (?, ?, ?, ?)`, "a", big, blob, "é\u2028"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n, b, s) VALUES (?, ?, ?, ?)`, "b", int64(math.MinInt64), nil, nil); err != nil {
		t.Fatal(err)
	}
	var n int64
	var gotB []byte
	var s sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT n, b, s FROM scratch WHERE k=? AND n=?`, "a", big).Scan(&n, &gotB, &s); err != nil {
		t.Fatal(err)
	}
	if n != big || !bytes.Equal(gotB, blob) || s.String != "é\u2028" {
		t.Fatalf("read back %d %x %q", n, gotB, s.String)
	}
	gotB = []byte("not nil")
	if err := db.QueryRowContext(ctx, `SELECT n, b, s FROM scratch WHERE k=?`, "b").Scan(&n, &gotB, &s); err != nil {
		t.Fatal(err)
	}
	if n != math.MinInt64 || gotB != nil || s.Valid {
		t.Fatalf("read back %d %x %v, want MinInt64 and two NULLs", n, gotB, s)
	}
	if err := db.QueryRowContext(ctx, `SELECT n FROM scratch WHERE k=?`, "none").Scan(&n); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("missing row: %v, want sql.ErrNoRows", err)
	}
	// Column: a value a row in order, none for no row, the query's error.
	if ns, err := storage.Column[int64](ctx, db, `SELECT n FROM scratch ORDER BY n`); err != nil || len(ns) != 2 || ns[0] != math.MinInt64 || ns[1] != big {
		t.Fatalf("Column: %v, %v; want [MinInt64 %d]", ns, err, big)
	}
	if ns, err := storage.Column[int64](ctx, db, `SELECT n FROM scratch WHERE k=?`, "none"); err != nil || ns != nil {
		t.Fatalf("Column of no row: %v, %v; want none", ns, err)
	}
	if _, err := storage.Column[int64](ctx, db, `SELECT n FROM no_such_table`); err == nil {
		t.Fatal("Column of a missing table: no error")
	}
}

func testTransactions(t *testing.T, b Backend) {
	ctx := context.Background()
	db := openScratch(t, b, "tx")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO scratch(k, n) VALUES ('gone', 1)`); err != nil {
		t.Fatal(err)
	}
	if n := count(t, tx, `SELECT count(*) FROM scratch`); n != 1 {
		t.Fatalf("the transaction sees %d rows of its own, want 1", n)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM scratch`); n != 0 {
		t.Fatalf("%d rows after a rollback, want 0", n)
	}

	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO scratch(k, n) VALUES (?, ?)`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := st.ExecContext(ctx, fmt.Sprint("k", i), i); err != nil {
			t.Fatal(err)
		}
	}
	// INSERT ... RETURNING in a transaction (epochs, holder acks).
	var k string
	if err := tx.QueryRowContext(ctx, `INSERT INTO scratch(k, n) VALUES (?, ?) RETURNING k`, "ret", 7).Scan(&k); err != nil || k != "ret" {
		t.Fatalf("insert returning: %q, %v", k, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		t.Fatalf("rollback after commit: %v, want sql.ErrTxDone", err)
	}
	if n := count(t, db, `SELECT count(*) FROM scratch`); n != 4 {
		t.Fatalf("%d rows after the commit, want 4", n)
	}
}

// testConcurrentWriters: write transactions of many goroutines queue for
// the write lock; none fails and no update is lost.
func testConcurrentWriters(t *testing.T, b Backend) {
	ctx := context.Background()
	db := openScratch(t, b, "writers")
	if _, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n) VALUES ('c', 0)`); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for range each {
				err := func() error {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					var n int64
					if err := tx.QueryRowContext(ctx, `SELECT n FROM scratch WHERE k='c'`).Scan(&n); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, `UPDATE scratch SET n=? WHERE k='c'`, n+1); err != nil {
						return err
					}
					return tx.Commit()
				}()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("writer: %v", err)
	}
	if n := count(t, db, `SELECT n FROM scratch WHERE k='c'`); n != writers*each {
		t.Fatalf("counter %d after %d read-modify-write transactions: updates lost", n, writers*each)
	}
}

// testUpserts: the two upsert forms the packages use.
func testUpserts(t *testing.T, b Backend) {
	ctx := context.Background()
	db := openScratch(t, b, "upserts")
	for range 2 {
		if _, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n) VALUES ('x', 1) ON CONFLICT DO NOTHING`); err != nil {
			t.Fatal(err)
		}
	}
	res, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n) VALUES ('x', 2) ON CONFLICT DO NOTHING`)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 0 {
		t.Fatalf("an ignored insert affected %d rows (%v), want 0", n, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n) VALUES ('x', 3)
		ON CONFLICT(k) DO UPDATE SET n=excluded.n`); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT n FROM scratch WHERE k='x'`); n != 3 {
		t.Fatalf("after the upsert n=%d, want 3", n)
	}
	// INSERT ... SELECT ... WHERE with DO NOTHING (keystore's guarded insert).
	if _, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n) SELECT k || '2', n FROM scratch WHERE k=? ON CONFLICT DO NOTHING`, "x"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM scratch`); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
}

func testBulk(t *testing.T, b Backend) {
	ctx := context.Background()
	db := openScratch(t, b, "bulk")
	for _, o := range []storage.BulkOptions{{}, {CacheKiB: 64 << 10, NoSync: true}, {Relaxed: true}} {
		err := db.Bulk(ctx, o, func(tx *storage.Tx) error {
			for i := range 100 {
				if _, err := tx.ExecContext(ctx, `INSERT INTO scratch(k, n) VALUES (?, ?)`, fmt.Sprintf("%v-%d", o, i), i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	err := db.Bulk(ctx, storage.BulkOptions{NoSync: true}, func(tx *storage.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO scratch(k, n) VALUES ('rolled back', 0)`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("bulk load: %v, want its function's error", err)
	}
	if err := db.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM scratch`); n != 300 {
		t.Fatalf("%d rows after three bulk loads of 100 and a failed one, want 300", n)
	}
}

func testMaintenance(t *testing.T, b Backend) {
	ctx := context.Background()
	db := b.Open(t, "maintenance")
	scratch(t, db)
	if _, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n, b) VALUES ('secret', 1, ?)`, bytes.Repeat([]byte{0xA5}, 4096)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM scratch`); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(context.Context) error{"FlushPages": db.FlushPages, "Scrub": db.Scrub, "Sync": db.Sync} {
		if err := f(ctx); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := db.ProbeWrite(ctx, time.Now()); err != nil {
		t.Fatalf("probe write: %v", err)
	}
	db.Close()
	if err := db.ProbeWrite(ctx, time.Now()); err == nil {
		t.Fatal("probe write of a closed database succeeded")
	}
}

func testReopen(t *testing.T, b Backend) {
	ctx := context.Background()
	db := b.Open(t, "reopen")
	scratch(t, db)
	if _, err := db.ExecContext(ctx, `INSERT INTO scratch(k, n) VALUES ('kept', 1)`); err != nil {
		t.Fatal(err)
	}
	var before int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM migrations`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = b.Open(t, "reopen")
	defer db.Close()
	if n := count(t, db, `SELECT count(*) FROM scratch WHERE k='kept'`); n != 1 {
		t.Fatal("a committed row is gone after reopening")
	}
	if n := count(t, db, `SELECT count(*) FROM migrations`); n != before {
		t.Fatalf("reopening recorded %d migrations, want the same %d", n, before)
	}
}

// testSecretPins: a new database pins nothing; pins come back as they
// were pinned, and one already pinned is never replaced (the call fails
// and writes none of its pins).
func testSecretPins(t *testing.T, b Backend) {
	ctx := context.Background()
	db := b.Open(t, "pins")
	defer db.Close()
	if pins, err := db.SecretPins(ctx); err != nil || len(pins) != 0 {
		t.Fatalf("the pins of a new database: %v, %v; want none", pins, err)
	}
	if err := db.PinSecrets(ctx, nil, time.Now()); err != nil {
		t.Fatalf("pinning nothing: %v", err)
	}
	want := map[string]string{"subject.key": "fp-subject", "root": "fp-root"}
	if err := db.PinSecrets(ctx, want, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := db.PinSecrets(ctx, map[string]string{"log.key": "fp-log", "root": "fp-other"}, time.Now()); err == nil {
		t.Fatal("a pinned secret was pinned again")
	}
	pins, err := db.SecretPins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pins) != fmt.Sprint(want) {
		t.Fatalf("pins %v, want %v", pins, want)
	}
}

// testCluster: the cluster-wide lock and notifications, between two
// handles on one database (two nodes); on an engine no other process
// shares, that they return at once.
func testCluster(t *testing.T, b Backend) {
	ctx := context.Background()
	a := b.Open(t, "cluster")
	defer a.Close()
	if !a.Shared() {
		release, err := a.Exclusive(ctx, "work")
		if err != nil {
			t.Fatal(err)
		}
		release()
		if err := a.Listen(ctx, "ch", func(string, bool) { t.Error("a listener of an unshared database was called") }); err != nil {
			t.Fatal(err)
		}
		return
	}
	c := b.Open(t, "cluster")
	defer c.Close()

	// The lock: c waits while a holds it, and gets it once a releases.
	release, err := a.Exclusive(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		r, err := c.Exclusive(ctx, "work")
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("a second node took a held lock")
	case <-time.After(300 * time.Millisecond):
	}
	other, err := c.Exclusive(ctx, "other work")
	if err != nil {
		t.Fatal(err)
	}
	other()
	release()
	select {
	case r, ok := <-got:
		if ok {
			r()
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was not handed over after its release")
	}
	// A waiter whose context ends gives up.
	release, err = a.Exclusive(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, err := c.Exclusive(short, "work"); err == nil {
		t.Fatal("Exclusive of a held lock returned before its context ended")
	}
	cancel()
	release()

	// Notifications: delivered after commit, in order, never for a rollback.
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	msgs := make(chan string, 16)
	started := make(chan struct{}, 4)
	go c.Listen(lctx, "shredd_test", func(p string, lost bool) {
		if lost {
			started <- struct{}{}
			return
		}
		msgs <- p
	})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not start")
	}
	send := func(p string, commit bool) {
		tx, err := a.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Notify(ctx, "shredd_test", p); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	send("one", true)
	send("rolled back", false)
	send("two", true)
	for _, want := range []string{"one", "two"} {
		select {
		case p := <-msgs:
			if p != want {
				t.Fatalf("notification %q, want %q", p, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("notification %q not delivered", want)
		}
	}
}
