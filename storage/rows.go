package storage

import (
	"context"
	"database/sql"
)

// Column runs query on q and returns its one column, a value a row in the
// rows' order. On an error it returns none: the query's, a scan's or the
// iteration's, unwrapped for the caller to name.
func Column[T any](ctx context.Context, q Querier, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return ScanColumn[T](rows)
}

// ScanColumn reads the one column of rows (a query's, or an UPDATE's
// RETURNING), a value a row, and closes rows. On an error it returns none.
func ScanColumn[T any](rows *sql.Rows) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
