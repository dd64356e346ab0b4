package keystore_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/storage/sqlite"
)

// TestSubjectsTableMigration opens a database whose subjects table has the
// layout of earlier releases (keyed by sid, with a partial index by bucket)
// and no record of migrations, and checks that storage/sqlite's migration
// rebuilds it keyed by bucket then sid, with every live key still opening
// through the key tree and every tombstone still refusing.
func TestSubjectsTableMigration(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, db := openTree(t, dir, 8)
	keys := createKeys(t, s, "m-", 50)
	gone := sid("m-0")
	delete(keys, gone)
	forget(t, s, db, gone)

	// Back to the old layout, as an earlier release made it.
	for _, q := range []string{
		`ALTER TABLE subjects RENAME TO subjects_new`,
		`CREATE TABLE subjects (sid BLOB PRIMARY KEY, gen INTEGER NOT NULL, state INTEGER NOT NULL, bucket INTEGER NOT NULL,
			bucket_gen INTEGER, wrapped BLOB, created_at INTEGER NOT NULL, forgotten_at INTEGER) WITHOUT ROWID`,
		`CREATE INDEX subjects_live_bucket ON subjects(bucket) WHERE wrapped IS NOT NULL`,
		`INSERT INTO subjects SELECT sid, gen, state, bucket, bucket_gen, wrapped, created_at, forgotten_at FROM subjects_new`,
		`DROP TABLE subjects_new`,
		`DROP TABLE migrations`, // made before migrations were recorded
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	db, err := sqlite.Open(filepath.Join(dir, "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	root, err := local.Open(filepath.Join(dir, "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := keystore.Open(ctx, db, root, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pk, idx, n int
	if err := db.QueryRowContext(ctx, `SELECT pk FROM pragma_table_info('subjects') WHERE name='bucket'`).Scan(&pk); err != nil || pk != 1 {
		t.Fatalf("bucket's place in the primary key: %d, %v; want 1", pk, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name IN ('subjects_live_bucket', 'subjects_by_sid')`).Scan(&idx); err != nil || idx != 0 {
		t.Fatalf("old index or table left: %d, %v", idx, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM subjects`).Scan(&n); err != nil || n != 50 {
		t.Fatalf("subjects after the migration: %d, %v; want 50", n, err)
	}
	for id, want := range keys {
		got, err := s2.KeyAt(ctx, envelope.Ref{SID: id, Gen: 1})
		if err != nil || !bytes.Equal(got.Key, want) {
			t.Fatalf("key after the migration: %v", err)
		}
	}
	if _, err := s2.Key(ctx, gone); err == nil {
		t.Fatal("the forgotten subject has a key after the migration")
	}
	// And once more: nothing left to migrate.
	if _, err := keystore.Open(ctx, db, root, keystore.Options{}); err != nil {
		t.Fatal(err)
	}
}
