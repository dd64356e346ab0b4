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
