package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// ProbeWrite checks that db accepts a write now: it upserts the one row of
// the readiness table, through the write gate like
// every other write, and commits it. A database that only reads (a full
// disk, a read-only file or mount, a closed handle, a write gate that stays
// taken until ctx ends) gives an error; reads alone would not show it. Each
// call is one small committed transaction (one fsync): meant for readiness
// probes every few seconds, not for hot paths.
func ProbeWrite(ctx context.Context, db *sql.DB, now time.Time) error {
	if _, err := db.ExecContext(ctx, `INSERT INTO readiness(id, checked_at) VALUES (1, ?)
		ON CONFLICT(id) DO UPDATE SET checked_at=excluded.checked_at`, now.UnixNano()); err != nil {
		return fmt.Errorf("storage: probe write: %w", err)
	}
	return nil
}
