package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"

	"github.com/shredd/shredd/storage"
)

// backupInfoSQL is the table Backup records a copy's BackupInfo in: the
// one object a database restored from a backup has beyond its migrations,
// accepted by the schema check with exactly this definition.
const backupInfoSQL = `CREATE TABLE backup_info (k TEXT PRIMARY KEY, v TEXT NOT NULL)`

// CheckSchema compares the schema of the database (sqlite_master: type,
// name, table and normalised SQL of every table, index, view and trigger)
// with that of a fresh in-memory database migrated to the same version
// (storage.Engine.CheckSchema).
func (e *engine) CheckSchema(ctx context.Context) error {
	return checkSchema(ctx, e.db)
}

// CheckFileSchema opens the SQLite database at path read-only (it is not
// migrated) and checks its schema as CheckSchema does, for a backup
// before it is restored. It returns the database's schema version.
func CheckFileSchema(ctx context.Context, path string) (int, error) {
	db, err := sql.Open("sqlite3", "file:"+uriEscape(path)+"?mode=ro")
	if err != nil {
		return 0, fmt.Errorf("storage: schema check: %w", err)
	}
	defer db.Close()
	v, err := recordedVersion(ctx, db)
	if err != nil {
		return 0, err
	}
	return v, checkSchema(ctx, db)
}

func uriEscape(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

func recordedVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("storage: schema version: %w", err)
	}
	return int(v.Int64), nil
}

func checkSchema(ctx context.Context, db *sql.DB) error {
	v, err := recordedVersion(ctx, db)
	if err != nil {
		return err
	}
	if v > SchemaVersion() {
		return fmt.Errorf("storage: the database is at schema version %d, this release knows up to %d: %w", v, SchemaVersion(), storage.ErrSchemaTooNew)
	}
	have, err := schemaObjects(ctx, db)
	if err != nil {
		return err
	}
	want, err := freshSchema(ctx, v)
	if err != nil {
		return err
	}
	// What shredd itself adds beside its migrations: the record of a
	// backup (exactly as Backup writes it), and the statistics tables an
	// operator's ANALYZE writes (they steer the query planner, never a
	// row's value).
	kept := have[:0]
	for _, o := range have {
		switch {
		case o.Type == "table" && o.Name == "backup_info" && o.Def == storage.NormalizeSQL(backupInfoSQL):
		case o.Type == "index" && o.Name == "sqlite_autoindex_backup_info_1" && o.Table == "backup_info":
		case o.Type == "table" && strings.HasPrefix(o.Name, "sqlite_stat"):
		default:
			kept = append(kept, o)
		}
	}
	if err := storage.CompareSchema(kept, want); err != nil {
		return fmt.Errorf("storage: schema version %d: %w", v, err)
	}
	return nil
}

// schemaObjects lists the objects of sqlite_master, every table, index,
// view and trigger with its normalised SQL (none for the indexes SQLite
// makes for UNIQUE and PRIMARY KEY constraints: their table's SQL says
// what they are).
func schemaObjects(ctx context.Context, db *sql.DB) ([]storage.SchemaObject, error) {
	rows, err := db.QueryContext(ctx, `SELECT type, name, tbl_name, sql FROM sqlite_master`)
	if err != nil {
		return nil, fmt.Errorf("storage: schema check: %w", err)
	}
	defer rows.Close()
	var out []storage.SchemaObject
	for rows.Next() {
		var o storage.SchemaObject
		var def sql.NullString
		if err := rows.Scan(&o.Type, &o.Name, &o.Table, &def); err != nil {
			return nil, fmt.Errorf("storage: schema check: %w", err)
		}
		o.Def = storage.NormalizeSQL(def.String)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: schema check: %w", err)
	}
	return out, nil
}

// freshSchema migrates an empty in-memory database to version v with this
// release's embedded migrations and lists its objects: the schema a
// database at version v must have.
func freshSchema(ctx context.Context, v int) ([]storage.SchemaObject, error) {
	all, err := storage.LoadMigrations(migrationFiles, "migrations", goSteps)
	if err != nil {
		return nil, err
	}
	if v > len(all) {
		return nil, fmt.Errorf("storage: schema version %d: %w", v, storage.ErrSchemaTooNew)
	}
	// One connection: each connection to ":memory:" is a database of its own.
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		return nil, fmt.Errorf("storage: schema check: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := storage.Migrate(ctx, db, all[:v], nil); err != nil {
		return nil, fmt.Errorf("storage: schema check: fresh migration: %w", err)
	}
	return schemaObjects(ctx, db)
}

// OpenReadOnly opens the SQLite database at path for reading only: no
// migration, no journal mode set, nothing written, so that a start can run
// its checks before it touches a byte. current is false (and the database
// nil) when the database's schema is not this release's (it needs a
// migration first, which only Open makes).
func OpenReadOnly(ctx context.Context, path string) (db *storage.DB, current bool, err error) {
	// Without a -wal file the database file holds everything: immutable
	// keeps SQLite from making -wal and -shm files to read it. With one (a
	// crash left it), its pages count, and SQLite reads it through the
	// -shm file that is there with it.
	q := "?mode=ro&_query_only=1&immutable=1"
	if _, err := os.Lstat(path + "-wal"); err == nil {
		q = "?mode=ro&_query_only=1"
	}
	sdb, err := sql.Open("sqlite3", "file:"+uriEscape(path)+q)
	if err != nil {
		return nil, false, fmt.Errorf("storage: open db read-only: %w", err)
	}
	sdb.SetMaxOpenConns(1)
	v, err := recordedVersion(ctx, sdb)
	if err != nil || v != SchemaVersion() {
		sdb.Close()
		return nil, false, err
	}
	return storage.New(sdb, &engine{db: sdb}), true, nil
}
