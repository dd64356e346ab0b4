package sealing

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage/sqlite"
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

// BulkOptions tune a bulk import.
type BulkOptions struct {
	// CacheKiB, when positive, sets the SQLite page cache of the
	// connection for the import: a large import into a large registry is
	// bound by random B-tree writes otherwise.
	CacheKiB int
	// NoSync commits without fsync (synchronous=OFF): for filling a data
	// directory offline, where a crash means filling it again. Never for a
	// registry in service.
	NoSync bool
}

// CountArtifacts returns the number of artifacts registered so far
// (artifacts are never deleted: the highest registration order).
func (s *Service) CountArtifacts(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM artifacts`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sealing: count artifacts: %w", err)
	}
	return n, nil
}

// BulkImport registers many artifacts in one transaction: the bulk
// path of Register, for migrations and for filling benchmark data
// directories. Every lineage subject must be live at its generation (the
// check runs inside the transaction, as for a single registration, so a
// forget committed before is refused); kinds must be registered. The caller
// vouches for the lineages: they are not recomputed from the parents.
func (s *Service) BulkImport(ctx context.Context, arts []BulkArtifact, o BulkOptions) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sealing: import: %w", err)
	}
	defer conn.Close()
	if o.CacheKiB > 0 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA cache_size=-%d", o.CacheKiB)); err != nil {
			return fmt.Errorf("sealing: import: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA cache_size=-%d", sqlite.CacheKiB))
	}
	if o.NoSync {
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=OFF"); err != nil {
			return fmt.Errorf("sealing: import: %w", err)
		}
		defer func() {
			// Back in the pool the connection must sync again; one that
			// cannot be reset is discarded.
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous=FULL"); err != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sealing: import: %w", err)
	}
	defer tx.Rollback()
	st := newTxStmts(tx)
	defer st.close()
	live := map[envelope.Ref]bool{}
	kinds := map[string]bool{}
	for i := range arts {
		a := &arts[i]
		if len(a.Direct) != len(a.Lineage) || len(a.Lineage) == 0 {
			return fmt.Errorf("sealing: import: artifact %s: lineage and direct differ or are empty: %w", a.ID, shredd.ErrInvalid)
		}
		if !kinds[a.Kind] {
			var one int
			if err := st.QueryRowContext(ctx, `SELECT 1 FROM kinds WHERE name=?`, a.Kind).Scan(&one); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("sealing: import: kind %q: %w", a.Kind, shredd.ErrUnknownKind)
				}
				return fmt.Errorf("sealing: import: %w", err)
			}
			kinds[a.Kind] = true
		}
		for _, r := range a.Lineage {
			if live[r] {
				continue
			}
			if err := s.keys.CheckLive(ctx, st, []envelope.Ref{r}); err != nil {
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
		if err := insertRecord(ctx, st, a.ID, a.Kind, a.Holder, a.Sealed, s.opts.Now(), a.Parents, a.Lineage, direct); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sealing: import: %w", err)
	}
	return nil
}
