package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/shredd/shredd/storage"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// goSteps are the Go halves of migrations, by version.
var goSteps = map[int]func(ctx context.Context, tx *sql.Tx) error{
	1:  legacyUpgrade,
	5:  integrityColumns,
	10: readColumns,
	11: probeColumns,
	12: reinstateColumns,
}

// SchemaVersion is the schema version this release migrates databases to:
// the number of its newest migration.
func SchemaVersion() int {
	m, err := storage.LoadMigrations(migrationFiles, "migrations", goSteps)
	if err != nil || len(m) == 0 {
		return 0
	}
	return m[len(m)-1].Version
}

// Version returns the schema version recorded in db (0 before any).
func Version(ctx context.Context, db *storage.DB) (int, error) {
	var v sql.NullInt64
	err := db.QueryRowContext(ctx, `SELECT max(version) FROM migrations`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("storage: schema version: %w", err)
	}
	return int(v.Int64), nil
}

// migrate brings db to SchemaVersion (storage.Migrate).
func migrate(ctx context.Context, db *sql.DB) error {
	all, err := storage.LoadMigrations(migrationFiles, "migrations", goSteps)
	if err != nil {
		return err
	}
	return storage.Migrate(ctx, db, all, nil)
}

// legacyUpgrade is the Go half of migration 1: a data directory made before
// migrations were recorded may lack columns added since its tables were
// created, and may keep subjects in the layout keyed by sid alone. Both are
// brought to the baseline; on a new database it changes nothing.
func legacyUpgrade(ctx context.Context, tx *sql.Tx) error {
	if err := addColumns(ctx, tx, [][3]string{
		{"forgets", "erased_at", "INTEGER"}, {"forgets", "commitment", "TEXT"}, {"forgets", "proof", "BLOB"}, {"forgets", "attestation", "BLOB"},
		{"buckets", "next_wrapped", "BLOB"}, {"buckets", "next_version", "INTEGER"},
	}); err != nil {
		return err
	}
	return clusterSubjects(ctx, tx)
}

// integrityColumns is the Go half of migration 5: the forgets' stall
// reason and sealed salt, added where missing (SQLite has no ADD COLUMN IF
// NOT EXISTS, and a database whose migrations table was lost runs every
// migration again).
func integrityColumns(ctx context.Context, tx *sql.Tx) error {
	return addColumns(ctx, tx, [][3]string{{"forgets", "stall_reason", "TEXT"}, {"forgets", "salt_sealed", "BLOB"}})
}

// readColumns is the Go half of migration 10: the reader and unit of a
// lease, a token's policy for undeclared derivations, and the index the
// check of a write's reads takes.
func readColumns(ctx context.Context, tx *sql.Tx) error {
	if err := addColumns(ctx, tx, [][3]string{{"leases", "reader", "TEXT"}, {"leases", "unit", "TEXT NOT NULL DEFAULT ''"}, {"tokens", "reads", "TEXT"},
		{"artifacts", "writer", "TEXT"}}); err != nil {
		return err
	}
	for _, ix := range []string{`CREATE INDEX IF NOT EXISTS leases_by_reader ON leases(reader, unit, holder, expires_at)`,
		`CREATE INDEX IF NOT EXISTS artifacts_by_writer ON artifacts(writer, created_at) WHERE writer IS NOT NULL`} {
		if _, err := tx.ExecContext(ctx, ix); err != nil {
			return err
		}
	}
	return nil
}

// probeColumns is the Go half of migration 11: a holder's probe
// compaction interval (NULL: it answers no probes).
func probeColumns(ctx context.Context, tx *sql.Tx) error {
	return addColumns(ctx, tx, [][3]string{{"holders", "probe_compact", "INTEGER"}})
}

// reinstateColumns is the Go half of migration 12: forgets.reinstated_at,
// and the unique index of one forget per subject made one per subject's
// life (the forgets not reinstated).
func reinstateColumns(ctx context.Context, tx *sql.Tx) error {
	if err := addColumns(ctx, tx, [][3]string{{"forgets", "reinstated_at", "INTEGER"}}); err != nil {
		return err
	}
	for _, q := range []string{`DROP INDEX IF EXISTS forgets_one_per_sid`,
		`CREATE UNIQUE INDEX IF NOT EXISTS forgets_one_per_life ON forgets(sid) WHERE reinstated_at IS NULL`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// addColumns adds each column {table, name, type} its table lacks.
func addColumns(ctx context.Context, tx *sql.Tx, cols [][3]string) error {
	for _, c := range cols {
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
	return nil
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
