package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/storagetest"
)

// TestMigrateDuplicateForgets: migration 0007 merges the forgets of one
// subject that nodes of an earlier release made, then builds its unique
// index (storagetest.ForgetDedupe).
func TestMigrateDuplicateForgets(t *testing.T) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all, err := storage.LoadMigrations(migrationFiles, "migrations", goSteps)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.ForgetDedupe(t, db, func(q string) string { return q }, func(upTo int) error {
		if upTo == 0 {
			upTo = len(all)
		}
		return storage.Migrate(context.Background(), db, all[:upTo], nil)
	})
}
