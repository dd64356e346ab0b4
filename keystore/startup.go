package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd/storage"
)

// HasSubjects reports whether db holds any subject, live or forgotten:
// a start asks it, before the key tree is opened, to learn whether the
// database holds data that needs the data directory's secrets.
func HasSubjects(ctx context.Context, db *storage.DB) (bool, error) {
	var one int
	switch err := db.QueryRowContext(ctx, `SELECT 1 FROM subjects LIMIT 1`).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("keystore: subjects: %w", err)
	}
	return true, nil
}
