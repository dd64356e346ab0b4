package erasure

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd/storage"
)

// HasForgets reports whether db holds any forget, in whatever state: a
// start asks it, before the service is opened, to learn whether the
// database holds data that needs the data directory's secrets.
func HasForgets(ctx context.Context, db *storage.DB) (bool, error) {
	var one int
	switch err := db.QueryRowContext(ctx, `SELECT 1 FROM forgets LIMIT 1`).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("erasure: forgets: %w", err)
	}
	return true, nil
}
