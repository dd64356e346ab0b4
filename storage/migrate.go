package storage

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A Migration is one numbered step of a backend's schema: a SQL file
// NNNN_name.sql, then an optional Go step in the same transaction.
type Migration struct {
	Version int
	Name    string
	SQL     string
	After   func(ctx context.Context, tx *sql.Tx) error
}

// LoadMigrations reads the migrations of a backend: the files dir/*.sql of
// fsys, numbered from 0001 without a gap, with the Go steps of after (by
// version).
func LoadMigrations(fsys fs.FS, dir string, after map[int]func(context.Context, *sql.Tx) error) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Migration
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != len(out)+1 {
			return nil, fmt.Errorf("storage: migration file %s: want %04d_name.sql", n, len(out)+1)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b), After: after[v]})
	}
	return out, nil
}

// MigrationsTable creates the table in which Migrate records the
// migrations applied (the same on every engine).
const MigrationsTable = `CREATE TABLE IF NOT EXISTS migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at BIGINT NOT NULL)`

// Migrate brings db to the newest of all: each migration not yet recorded
// in the migrations table runs in a transaction of its own, together with
// its record, so that a crash leaves the schema at one version or the
// next. A database recorded at a version newer than all know is refused
// with ErrSchemaTooNew. rebind turns the ? placeholders of its own queries
// into the engine's (nil: as written). Where several processes share the
// database, the backend serialises their calls (a lock held around
// Migrate).
func Migrate(ctx context.Context, db *sql.DB, all []Migration, rebind func(string) string) error {
	if rebind == nil {
		rebind = func(q string) string { return q }
	}
	if _, err := db.ExecContext(ctx, MigrationsTable); err != nil {
		return fmt.Errorf("storage: migrate: %w", err)
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM migrations`).Scan(&v); err != nil {
		return fmt.Errorf("storage: schema version: %w", err)
	}
	have := int(v.Int64)
	if have > len(all) {
		return fmt.Errorf("storage: the database is at schema version %d, this release knows up to %d: %w; run the release that wrote it, or a newer one",
			have, len(all), ErrSchemaTooNew)
	}
	for _, m := range all[have:] {
		if err := apply(ctx, db, m, rebind); err != nil {
			return fmt.Errorf("storage: migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, m Migration, rebind func(string) string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var done int
	if err := tx.QueryRowContext(ctx, rebind(`SELECT count(*) FROM migrations WHERE version=?`), m.Version).Scan(&done); err != nil {
		return err
	}
	if done > 0 {
		return nil // another process got there first
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if m.After != nil {
		if err := m.After(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, rebind(`INSERT INTO migrations(version, name, applied_at) VALUES (?, ?, ?)`),
		m.Version, m.Name, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}
