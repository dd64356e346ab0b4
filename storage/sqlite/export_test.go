package sqlite

import "github.com/shredd/shredd/storage/storagetest"

// Migrations are the embedded migration files, for the conformance suite
// (storagetest.Backend.Migrations).
var Migrations = storagetest.Sub(migrationFiles, "migrations")
