package erasure

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/ledger"
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

// aliases adds to out the ids merged into other forgets (committedForgets).
func aliases(ctx context.Context, db *storage.DB, out map[shredd.ID]ledger.Known) error {
	ids, err := idSet(ctx, db, `SELECT id FROM forget_aliases`)
	if err != nil {
		return fmt.Errorf("erasure: forget aliases: %w", err)
	}
	for id := range ids {
		out[id] = ledger.Known{Alias: true}
	}
	return nil
}
