package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shredd/shredd/storage"
)

// catalogQueries list a schema's objects ($1: its name) from pg_catalog,
// each row (type, name, table, definition): relations (tables, views,
// sequences, indexes, with their row-level security flags), columns,
// constraints, triggers, rules, row-level security policies and
// functions. Definitions come from pg_get_*def, which name objects of
// other schemas with their schema: the caller strips the two schemas'
// names.
var catalogQueries = []string{
	`SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
		WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table'
		WHEN 'i' THEN 'index' WHEN 'I' THEN 'index' ELSE 'relation ' || c.relkind::text END,
		c.relname, coalesce(t.relname, c.relname),
		CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid)
			WHEN c.relkind IN ('i', 'I') THEN pg_get_indexdef(c.oid) ELSE '' END
		|| ' rls=' || c.relrowsecurity::text || ' force_rls=' || c.relforcerowsecurity::text
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	LEFT JOIN pg_index x ON x.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = x.indrelid
	WHERE n.nspname = $1`,
	`SELECT 'column', c.relname || '.' || a.attname, c.relname,
		format_type(a.atttypid, a.atttypmod) || ' not_null=' || a.attnotnull::text
		|| ' identity=' || a.attidentity::text || ' generated=' || a.attgenerated::text
		|| ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
	FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f')`,
	`SELECT 'constraint', k.conname, coalesce(c.relname, ''), k.contype::text || ' ' || pg_get_constraintdef(k.oid)
	FROM pg_constraint k JOIN pg_namespace n ON n.oid = k.connamespace LEFT JOIN pg_class c ON c.oid = k.conrelid
	WHERE n.nspname = $1`,
	`SELECT 'trigger', t.tgname, c.relname, pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
	FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1 AND NOT t.tgisinternal`,
	`SELECT 'rule', r.rulename, c.relname, pg_get_ruledef(r.oid)
	FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1 AND r.rulename <> '_RETURN'`,
	`SELECT 'policy', p.polname, c.relname, p.polcmd::text || ' ' || coalesce(pg_get_expr(p.polqual, p.polrelid), '')
		|| ' ' || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '')
	FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1`,
	`SELECT 'function', p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')', '', p.prokind::text || ' ' || p.prosrc
	FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
	WHERE n.nspname = $1`,
}

// CheckSchema compares the objects of the database's schema (its
// current_schema) in pg_catalog with those of a fresh migration to the
// same version, made in a schema of its own inside a transaction that is
// rolled back: nothing of it outlives the call, and nodes that check at
// once do not meet. The role needs the CREATE privilege on the database
// (it has it when it owns the database, as docs/scale-out.md sets it up).
func (e *engine) CheckSchema(ctx context.Context) error {
	all, err := storage.LoadMigrations(migrationFiles, "migrations", nil)
	if err != nil {
		return err
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storage: schema check: %w", err)
	}
	defer tx.Rollback()
	var live string
	var v sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&live); err != nil {
		return fmt.Errorf("storage: schema check: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT max(version) FROM migrations`).Scan(&v); err != nil {
		return fmt.Errorf("storage: schema version: %w", err)
	}
	if int(v.Int64) > len(all) {
		return fmt.Errorf("storage: the database is at schema version %d, this release knows up to %d: %w", v.Int64, len(all), storage.ErrSchemaTooNew)
	}
	b := make([]byte, 8)
	rand.Read(b)
	fresh := "shredd_schemacheck_" + hex.EncodeToString(b)
	if _, err := tx.ExecContext(ctx, `CREATE SCHEMA `+fresh); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			return fmt.Errorf("storage: schema check: shredd's role may not create a schema to compare the database's with (it is rolled back at once): grant it CREATE on the database: %w", err)
		}
		return fmt.Errorf("storage: schema check: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `SET LOCAL search_path TO `+fresh); err != nil {
		return fmt.Errorf("storage: schema check: %w", err)
	}
	if _, err := tx.ExecContext(ctx, storage.MigrationsTable); err != nil {
		return fmt.Errorf("storage: schema check: fresh migration: %w", err)
	}
	for _, m := range all[:v.Int64] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("storage: schema check: fresh migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	strip := func(def string) string {
		for _, s := range []string{live, fresh} {
			def = strings.ReplaceAll(def, `"`+s+`".`, "")
			def = strings.ReplaceAll(def, s+".", "")
		}
		return def
	}
	have, err := catalog(ctx, tx, live, strip)
	if err != nil {
		return err
	}
	want, err := catalog(ctx, tx, fresh, strip)
	if err != nil {
		return err
	}
	if err := storage.CompareSchema(have, want); err != nil {
		return fmt.Errorf("storage: schema version %d: %w", v.Int64, err)
	}
	return nil
}

func catalog(ctx context.Context, tx *sql.Tx, schema string, strip func(string) string) ([]storage.SchemaObject, error) {
	var out []storage.SchemaObject
	for _, q := range catalogQueries {
		rows, err := tx.QueryContext(ctx, q, schema)
		if err != nil {
			return nil, fmt.Errorf("storage: schema check: %w", err)
		}
		for rows.Next() {
			var o storage.SchemaObject
			if err := rows.Scan(&o.Type, &o.Name, &o.Table, &o.Def); err != nil {
				rows.Close()
				return nil, fmt.Errorf("storage: schema check: %w", err)
			}
			o.Def = strip(o.Def)
			out = append(out, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("storage: schema check: %w", err)
		}
	}
	return out, nil
}

var _ storage.Engine = (*engine)(nil)
