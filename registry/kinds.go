package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shredd/shredd"
)

// PutKind registers a kind, or updates its description. It reports whether
// the kind is new.
func (s *Registry) PutKind(ctx context.Context, name, description string) (shredd.Kind, bool, error) {
	if !shredd.ValidKind(name) {
		return shredd.Kind{}, false, fmt.Errorf("registry: kind name: %w", shredd.ErrInvalid)
	}
	if len(description) > 1024 {
		return shredd.Kind{}, false, fmt.Errorf("registry: kind description over 1024 bytes: %w", shredd.ErrInvalid)
	}
	now := s.opts.Now()
	res, err := s.db.ExecContext(ctx, `INSERT INTO kinds(name, description, created_at) VALUES (?, ?, ?)
		ON CONFLICT(name) DO NOTHING`, name, description, now.UnixNano())
	if err != nil {
		return shredd.Kind{}, false, fmt.Errorf("registry: put kind: %w", err)
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		if _, err := s.db.ExecContext(ctx, `UPDATE kinds SET description=? WHERE name=?`, description, name); err != nil {
			return shredd.Kind{}, false, fmt.Errorf("registry: put kind: %w", err)
		}
	}
	var k shredd.Kind
	var created int64
	if err := s.db.QueryRowContext(ctx, `SELECT name, description, created_at FROM kinds WHERE name=?`, name).Scan(&k.Name, &k.Description, &created); err != nil {
		return shredd.Kind{}, false, fmt.Errorf("registry: put kind: %w", err)
	}
	k.CreatedAt = time.Unix(0, created).UTC()
	return k, n == 1, nil
}

// Kinds lists the registered kinds by name.
func (s *Registry) Kinds(ctx context.Context) ([]shredd.Kind, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, description, created_at FROM kinds ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("registry: kinds: %w", err)
	}
	defer rows.Close()
	out := []shredd.Kind{}
	for rows.Next() {
		var k shredd.Kind
		var created int64
		if err := rows.Scan(&k.Name, &k.Description, &created); err != nil {
			return nil, fmt.Errorf("registry: kinds: %w", err)
		}
		k.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, k)
	}
	return out, rows.Err()
}

// KindRegistered reports whether the kind name is registered.
func (s *Registry) KindRegistered(ctx context.Context, name string) (bool, error) {
	return kindRegistered(ctx, s.db, name)
}

// rowQuerier runs a query for one row: the database or a transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// kindRegistered is KindRegistered through q.
func kindRegistered(ctx context.Context, q rowQuerier, name string) (bool, error) {
	var one int
	switch err := q.QueryRowContext(ctx, `SELECT 1 FROM kinds WHERE name=?`, name).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
