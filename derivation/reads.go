package derivation

import (
	"context"

	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/storage"
)

// Reads that became lineage (docs/api.md "What a read costs a writer"):
// every write is checked against the decrypt leases its writer holds, and
// the check's outcome is kept, one row per lease and write, with how the
// write closed the read (shredd.ReadNamed, ReadInherited, ReadIndependent).
// A refused write leaves one row per lease it left undeclared, under the
// all-zero artifact id (RefusedArtifact): nothing was written, and the
// forget of the lease's lineage counts it.

// RefusedArtifact is the artifact id of a refused write's read links.
var RefusedArtifact shredd.ID

// insertReads writes the read links of rows in tx, one prepared statement
// per link; a link already written (a registration folded again) stays.
func insertReads(ctx context.Context, tx *storage.Tx, rows []Row) error {
	for _, r := range rows {
		for _, rd := range r.Reads {
			if _, err := tx.ExecContext(ctx, `INSERT INTO read_links(lease, artifact, how) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
				rd.Lease[:], r.ID[:], rd.How); err != nil {
				return fmt.Errorf("derivation: record reads: %w", err)
			}
		}
	}
	return nil
}

// RecordRefused writes that a write was refused for leaving leases
// undeclared: one row per lease, whatever the number of refusals.
func (s *Graph) RecordRefused(ctx context.Context, leases []shredd.ID) error {
	for _, l := range leases {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO read_links(lease, artifact, how) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			l[:], RefusedArtifact[:], shredd.ReadRefused); err != nil {
			return fmt.Errorf("derivation: record refused: %w", err)
		}
	}
	return nil
}

// ReadsOf returns the read links of artifact id, by lease.
func (s *Graph) ReadsOf(ctx context.Context, id shredd.ID) ([]shredd.Read, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT lease, how FROM read_links WHERE artifact = ? ORDER BY lease`, id[:])
	if err != nil {
		return nil, fmt.Errorf("derivation: reads: %w", err)
	}
	defer rows.Close()
	var out []shredd.Read
	for rows.Next() {
		var lease []byte
		var rd shredd.Read
		if err := rows.Scan(&lease, &rd.How); err != nil {
			return nil, fmt.Errorf("derivation: reads: %w", err)
		}
		copy(rd.Lease[:], lease)
		out = append(out, rd)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("derivation: reads: %w", err)
	}
	return out, nil
}
