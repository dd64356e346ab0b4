package postgres_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/postgres"
	"github.com/shredd/shredd/storage/storagetest"
	"github.com/shredd/shredd/testkit/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Cleanup()
	os.Exit(code)
}

// TestConformance runs the storage conformance suite on a real PostgreSQL
// server.
func TestConformance(t *testing.T) {
	srv := pgtest.Shared(t)
	var mu sync.Mutex
	dsns := map[string]string{}
	storagetest.Run(t, storagetest.Backend{
		Migrations: postgres.Migrations,
		Open: func(t *testing.T, name string) *storage.DB {
			mu.Lock()
			dsn, ok := dsns[name]
			if !ok {
				dsn = srv.NewDatabase(t)
				dsns[name] = dsn
			}
			mu.Unlock()
			db, err := postgres.Open(context.Background(), dsn, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
	})
}
