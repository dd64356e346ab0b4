package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shredd/shredd/storage"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered step of the schema: a SQL file of migrations/
// named NNNN_name.sql, then an optional Go step in the same transaction.
type migration struct {
	version int
	name    string
	sql     string
	after   func(ctx context.Context, tx *sql.Tx) error
}

// goSteps are the Go halves of migrations, by version.
var goSteps = map[int]func(ctx context.Context, tx *sql.Tx) error{
	1: legacyUpgrade,
}

// migrations returns the embedded migrations in order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []migration
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != len(out)+1 {
			return nil, fmt.Errorf("storage: migration file %s: want %04d_name.sql", n, len(out)+1)
		}
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b), after: goSteps[v]})
	}
	return out, nil
}

// SchemaVersion is the schema version this release migrates databases to:
// the number of its newest migration.
func SchemaVersion() int {
	m, err := migrations()
	if err != nil || len(m) == 0 {
		return 0
	}
	return m[len(m)-1].version
}

// Version returns the schema version recorded in db (0 before any).
func Version(ctx context.Context, db *storage.DB) (int, error) {
	e, ok := db.Engine().(*engine)
	if !ok {
		return 0, fmt.Errorf("storage: schema version: a %s database, not SQLite", db.Engine().Name())
	}
	return version(ctx, e.db)
}

func version(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type='table' AND name='migrations'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("storage: schema version: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("storage: schema version: %w", err)
	}
	return int(v.Int64), nil
}

// migrate brings db to SchemaVersion: each migration not yet recorded in
// the migrations table runs in a transaction of its own, together with its
// record, so that a crash leaves the schema at one version or the next. A
// database recorded at a version this release does not know is refused
// with storage.ErrSchemaTooNew.
func migrate(ctx context.Context, db *sql.DB) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("storage: migrate: %w", err)
	}
	have, err := version(ctx, db)
	if err != nil {
		return err
	}
	if have > len(all) {
		return fmt.Errorf("storage: the database is at schema version %d, this release knows up to %d: %w; run the release that wrote it, or a newer one",
			have, len(all), storage.ErrSchemaTooNew)
	}
	for _, m := range all[have:] {
		if err := apply(ctx, db, m); err != nil {
			return fmt.Errorf("storage: migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, m migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE version=?`, m.version).Scan(&done); err != nil {
		return err
	}
	if done > 0 {
		return nil // another process of the same file got there first
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if m.after != nil {
		if err := m.after(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO migrations(version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// legacyUpgrade is the Go half of migration 1: a data directory made before
// migrations were recorded may lack columns added since its tables were
// created, and may keep subjects in the layout keyed by sid alone. Both are
// brought to the baseline; on a new database it changes nothing.
func legacyUpgrade(ctx context.Context, tx *sql.Tx) error {
	for _, c := range [][3]string{
		{"forgets", "erased_at", "INTEGER"}, {"forgets", "commitment", "TEXT"}, {"forgets", "proof", "BLOB"}, {"forgets", "attestation", "BLOB"},
		{"buckets", "next_wrapped", "BLOB"}, {"buckets", "next_version", "INTEGER"},
	} {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name=?`, c[0], c[1]).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE `+c[0]+` ADD COLUMN `+c[1]+` `+c[2]); err != nil {
				return err
			}
		}
	}
	return clusterSubjects(ctx, tx)
}

// clusterSubjects rebuilds a subjects table keyed by sid alone (releases
// before 2026-11, with an index by bucket) as the baseline's table keyed by
// (bucket, sid), so that a bucket's keys are adjacent. secure_delete zeroes
// the old table's pages as they are freed.
func clusterSubjects(ctx context.Context, tx *sql.Tx) error {
	var pk int
	if err := tx.QueryRowContext(ctx, `SELECT pk FROM pragma_table_info('subjects') WHERE name='bucket'`).Scan(&pk); err != nil {
		return err
	}
	if pk == 1 {
		return nil
	}
	for _, q := range []string{
		`DROP INDEX IF EXISTS subjects_live_bucket`,
		`ALTER TABLE subjects RENAME TO subjects_by_sid`,
		`CREATE TABLE subjects (
			sid BLOB NOT NULL,
			gen INTEGER NOT NULL,
			state INTEGER NOT NULL,
			bucket INTEGER NOT NULL,
			bucket_gen INTEGER,
			wrapped BLOB,
			created_at INTEGER NOT NULL,
			forgotten_at INTEGER,
			PRIMARY KEY (bucket, sid)) WITHOUT ROWID`,
		`INSERT INTO subjects(sid, gen, state, bucket, bucket_gen, wrapped, created_at, forgotten_at)
			SELECT sid, gen, state, bucket, bucket_gen, wrapped, created_at, forgotten_at FROM subjects_by_sid ORDER BY bucket, sid`,
		`DROP TABLE subjects_by_sid`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("subjects layout: %w", err)
		}
	}
	return nil
}
