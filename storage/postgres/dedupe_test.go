package postgres

import (
	"context"
	"database/sql"
	"testing"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/storagetest"
	"github.com/shredd/shredd/testkit/pgtest"
)

// TestMigrateDuplicateForgets: migration 0007 merges the forgets of one
// subject that nodes of an earlier release made, then builds its unique
// index (storagetest.ForgetDedupe), on a real PostgreSQL server.
func TestMigrateDuplicateForgets(t *testing.T) {
	db, err := sql.Open("pgx", pgtest.Shared(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all, err := storage.LoadMigrations(migrationFiles, "migrations", nil)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.ForgetDedupe(t, db, rebind, func(upTo int) error {
		if upTo == 0 {
			upTo = len(all)
		}
		return storage.Migrate(context.Background(), db, all[:upTo], rebind)
	})
}
