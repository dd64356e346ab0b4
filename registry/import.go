package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
)

// BulkArtifact is one artifact of a bulk import (BulkImport): its lineage is
// given whole, as the registry stores it.
type BulkArtifact struct {
	ID      shredd.ID
	Kind    string
	Holder  string
	Sealed  bool
	Parents []shredd.ID
	// Lineage is every subject of the closure (its own subjects and its
	// parents'), with the key generation; Direct marks its own subjects.
	Lineage []envelope.Ref
	Direct  []bool
}

// CountArtifacts returns the number of artifacts registered so far
// (artifacts are never deleted: the highest registration order).
func (s *Registry) CountArtifacts(ctx context.Context) (int64, error) {
	if err := s.Fold(ctx); err != nil {
		return 0, err
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM artifacts`).Scan(&n); err != nil {
		return 0, fmt.Errorf("registry: count artifacts: %w", err)
	}
	return n, nil
}

// BulkImport registers many artifacts in one transaction: the bulk
// path of Register, for migrations and for filling benchmark data
// directories. Every lineage subject must be live at its generation (the
// check runs inside the transaction, as for a single registration, so a
// forget committed before is refused); kinds must be registered. The caller
// vouches for the lineages: they are not recomputed from the parents.
func (s *Registry) BulkImport(ctx context.Context, arts []BulkArtifact, o storage.BulkOptions) error {
	var inner error // the import's own errors say what failed already
	err := s.db.Bulk(ctx, o, func(tx *storage.Tx) error {
		inner = s.bulkImport(ctx, tx, arts)
		return inner
	})
	if err != nil && err != inner {
		return fmt.Errorf("registry: import: %w", err)
	}
	return err
}

func (s *Registry) bulkImport(ctx context.Context, tx *storage.Tx, arts []BulkArtifact) error {
	live := map[envelope.Ref]bool{}
	kinds := map[string]bool{}
	for i := range arts {
		a := &arts[i]
		if len(a.Direct) != len(a.Lineage) || len(a.Lineage) == 0 {
			return fmt.Errorf("registry: import: artifact %s: lineage and direct differ or are empty: %w", a.ID, shredd.ErrInvalid)
		}
		if !kinds[a.Kind] {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM kinds WHERE name=?`, a.Kind).Scan(&one); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("registry: import: kind %q: %w", a.Kind, shredd.ErrUnknownKind)
				}
				return fmt.Errorf("registry: import: %w", err)
			}
			kinds[a.Kind] = true
		}
		for _, r := range a.Lineage {
			if live[r] {
				continue
			}
			if err := s.live.CheckLive(ctx, tx, []envelope.Ref{r}); err != nil {
				return MapKeyErr(err)
			}
			live[r] = true
		}
		direct := func(sid envelope.SID) bool {
			for j, r := range a.Lineage {
				if r.SID == sid {
					return a.Direct[j]
				}
			}
			return false
		}
		if err := insertRecord(ctx, tx, a.ID, a.Kind, a.Holder, a.Sealed, s.opts.Now(), a.Parents, a.Lineage, direct); err != nil {
			return err
		}
	}
	return nil
}
