package sqlite

import "github.com/shredd/shredd/storage/storagetest"

// Migrations are the embedded migration files, for the conformance suite
// (storagetest.Backend.Migrations).
var Migrations = storagetest.Sub(migrationFiles, "migrations")

// HeapLimitSet is SQLite's soft heap limit in bytes, as set now.
func HeapLimitSet() int64 { return heapLimitSet() }

// SetHeapLimitBase makes the limit kib instead of HeapLimitKiB (0: none)
// until the returned function puts it back.
func SetHeapLimitBase(kib int64) (undo func()) {
	prev := heapLimitBase
	heapLimitBase = kib
	setHeapLimit(0)
	return func() { heapLimitBase = prev; setHeapLimit(0) }
}
