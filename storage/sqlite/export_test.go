package sqlite

import "io/fs"

// Migrations are the embedded migration files, for the conformance suite
// (storagetest.Backend.Migrations).
var Migrations = mustSub(migrationFiles, "migrations")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

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
