package erasure

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/storage"
)

// resolveAlias returns the forget that answers for id: id itself, or, when
// migration 0007 merged id into another forget of its subject (several
// nodes of an earlier release each made one), the forget kept
// (forget_aliases). Every read by id goes through it, so that each id
// once answered to a caller keeps answering, with the kept forget.
func resolveAlias(ctx context.Context, db *storage.DB, id shredd.ID) (shredd.ID, error) {
	var b []byte
	err := db.QueryRowContext(ctx, `SELECT forget FROM forget_aliases WHERE id=?`, id[:]).Scan(&b)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return id, nil
	case err != nil:
		return id, fmt.Errorf("erasure: forget %s: %w", id, err)
	}
	var kept shredd.ID
	copy(kept[:], b)
	return kept, nil
}

// isAlias reports whether id is a forget migration 0007 merged into
// another: a ledger line or forget record naming it is present in the
// database (as the kept forget), never committed again.
func isAlias(ctx context.Context, db *storage.DB, id shredd.ID) (bool, error) {
	kept, err := resolveAlias(ctx, db, id)
	return kept != id, err
}
