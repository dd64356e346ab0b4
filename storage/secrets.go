package storage

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// SecretPins returns the fingerprints of the secrets the database's data
// depends on, as the database pins them (table secrets), by the secret's
// name: empty for a new database, or one from a release before the pins.
// What the names and fingerprints are is the caller's (cmd/shredd/node).
func (d *DB) SecretPins(ctx context.Context) (map[string]string, error) {
	rows, err := d.QueryContext(ctx, `SELECT name, fingerprint FROM secrets`)
	if err != nil {
		return nil, fmt.Errorf("database: pinned secrets: %w", err)
	}
	defer rows.Close()
	pins := map[string]string{}
	for rows.Next() {
		var name, fp string
		if err := rows.Scan(&name, &fp); err != nil {
			return nil, fmt.Errorf("database: pinned secrets: %w", err)
		}
		pins[name] = fp
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("database: pinned secrets: %w", err)
	}
	return pins, nil
}

// PinSecrets pins each fingerprint of pins under its name, pinned at at,
// all in one transaction. A pin is never replaced: a name the database
// pins already fails the call, and nothing of it is written.
func (d *DB) PinSecrets(ctx context.Context, pins map[string]string, at time.Time) error {
	names := make([]string, 0, len(pins))
	for name := range pins {
		names = append(names, name)
	}
	sort.Strings(names)
	return d.Bulk(ctx, BulkOptions{}, func(tx *Tx) error {
		for _, name := range names {
			if _, err := tx.ExecContext(ctx, `INSERT INTO secrets(name, fingerprint, pinned_at) VALUES (?, ?, ?)`, name, pins[name], at.UnixNano()); err != nil {
				return fmt.Errorf("database: pin secrets: %w", err)
			}
		}
		return nil
	})
}
