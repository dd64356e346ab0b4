package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
)

// schemaOf describes every table of db: its columns (name, type, not
// null, primary key position) and its indexes, as SQLite reports them.
func schemaOf(t *testing.T, db storage.Querier) map[string][]string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string][]string{}
	for _, tb := range tables {
		cols, err := db.QueryContext(ctx, `SELECT name, type, "notnull", pk FROM pragma_table_info(?)`, tb)
		if err != nil {
			t.Fatal(err)
		}
		for cols.Next() {
			var name, typ string
			var nn, pk int
			cols.Scan(&name, &typ, &nn, &pk)
			out[tb] = append(out[tb], fmt.Sprintf("%s %s notnull=%d pk=%d", name, typ, nn, pk))
		}
		cols.Close()
		idx, err := db.QueryContext(ctx, `SELECT name FROM pragma_index_list(?) WHERE origin='c'`, tb)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for idx.Next() {
			var name string
			idx.Scan(&name)
			names = append(names, "index "+name)
		}
		idx.Close()
		slices.Sort(names)
		out[tb] = append(out[tb], names...)
	}
	return out
}

func copyDB(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "shredd.db")
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestMigrateOldRelease opens the database of a data directory made by the
// release before recorded migrations (testdata/release-08637c3) and checks
// that it ends at this release's schema version with exactly the schema a
// new database gets, and with its rows.
func TestMigrateOldRelease(t *testing.T) {
	ctx := context.Background()
	path := copyDB(t, filepath.Join("..", "..", "testdata", "release-08637c3", "shredd.db"))
	count := func(db storage.Querier, table string) int {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	raw, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, tb := range []string{"subjects", "artifacts", "forgets", "log_entries", "tokens", "buckets"} {
		before[tb] = count(raw, tb)
	}
	raw.Close()

	old, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if v, err := sqlite.Version(ctx, old); err != nil || v != sqlite.SchemaVersion() || v < 1 {
		t.Fatalf("schema version after migrating: %d, %v; want %d", v, err, sqlite.SchemaVersion())
	}
	fresh, err := sqlite.Open(filepath.Join(t.TempDir(), "fresh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	got, want := schemaOf(t, old), schemaOf(t, fresh)
	for tb, cols := range want {
		if !slices.Equal(got[tb], cols) {
			t.Errorf("table %s migrated:\n  %q\nnew:\n  %q", tb, got[tb], cols)
		}
	}
	for tb := range got {
		if _, ok := want[tb]; !ok {
			t.Errorf("table %s left by the migration, not in a new database", tb)
		}
	}
	// The schema check of every start accepts it: the same objects, though
	// written by an older release with other whitespace.
	if err := old.CheckSchema(ctx); err != nil {
		t.Errorf("schema check of the migrated old database: %v", err)
	}
	for tb, n := range before {
		if m := count(old, tb); m != n || n == 0 {
			t.Errorf("%s: %d rows after the migration, %d before (want equal, and not 0)", tb, m, n)
		}
	}
	// Opening again changes nothing.
	old.Close()
	again, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}

// TestMigrateRefusesNewerSchema: a database a newer release migrated is
// refused, not misread.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shredd.db")
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(context.Background(), `INSERT INTO migrations(version, name, applied_at) VALUES (?, 'from_the_future', 0)`, sqlite.SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(path); !errors.Is(err, storage.ErrSchemaTooNew) {
		t.Fatalf("open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
}
