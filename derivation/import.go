package derivation

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd/envelope"
)

// Import is one artifact of a bulk import (ImportArtifacts): its lineage is
// given whole, as the registry stores it.
type Import struct {
	ID      ID
	Kind    string
	Holder  string
	Sealed  bool
	Parents []ID
	// Lineage is every subject of the closure (its own subjects and its
	// parents'), with the key generation; Direct marks its own subjects.
	Lineage []envelope.Ref
	Direct  []bool
}

// ImportArtifacts registers many artifacts in one transaction: the bulk
// path of Register, for migrations and for filling benchmark data
// directories. Every lineage subject must be live at its generation (the
// check runs inside the transaction, as for a single registration, so a
// forget committed before is refused); kinds must be registered. The caller
// vouches for the lineages: they are not recomputed from the parents.
// cacheKiB, when positive, sets the SQLite page cache of the connection for
// the duration of the import (a large import into a large registry is
// bound by random B-tree writes otherwise).
func (s *Service) ImportArtifacts(ctx context.Context, arts []Import, cacheKiB int) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("derivation: import: %w", err)
	}
	defer conn.Close()
	if cacheKiB > 0 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA cache_size=-%d", cacheKiB)); err != nil {
			return fmt.Errorf("derivation: import: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA cache_size=-2000") // SQLite's default
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("derivation: import: %w", err)
	}
	defer tx.Rollback()
	st := newTxStmts(tx)
	defer st.close()
	live := map[envelope.Ref]bool{}
	kinds := map[string]bool{}
	for i := range arts {
		a := &arts[i]
		if len(a.Direct) != len(a.Lineage) || len(a.Lineage) == 0 {
			return fmt.Errorf("derivation: import: artifact %s: lineage and direct differ or are empty: %w", a.ID, ErrInvalid)
		}
		if !kinds[a.Kind] {
			var one int
			if err := st.QueryRowContext(ctx, `SELECT 1 FROM kinds WHERE name=?`, a.Kind).Scan(&one); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("derivation: import: kind %q: %w", a.Kind, ErrUnknownKind)
				}
				return fmt.Errorf("derivation: import: %w", err)
			}
			kinds[a.Kind] = true
		}
		for _, r := range a.Lineage {
			if live[r] {
				continue
			}
			if err := s.keys.CheckLive(ctx, st, []envelope.Ref{r}); err != nil {
				return mapKeyErr(err)
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
		if err := insertRecord(ctx, st, a.ID, a.Kind, a.Holder, a.Sealed, s.opts.Now(), a.Parents, a.Lineage, direct); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("derivation: import: %w", err)
	}
	return nil
}
