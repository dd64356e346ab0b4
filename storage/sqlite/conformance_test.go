package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/storage/storagetest"
)

// TestConformance runs the storage conformance suite on real SQLite files.
func TestConformance(t *testing.T) {
	dir := t.TempDir()
	storagetest.Run(t, storagetest.Backend{
		Migrations: sqlite.Migrations,
		Open: func(t *testing.T, name string) *storage.DB {
			db, err := sqlite.Open(filepath.Join(dir, name+".db"))
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
	})
}
