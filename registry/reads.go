package registry

import (
	"context"
	"fmt"
	"slices"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/derivation"
	"github.com/shredd/shredd/envelope"
)

// LineageReads is what shredd observed of the reads of a subject's
// lineage (docs/api.md "What a read costs a writer"): the leases issued on
// its artifacts, and the writes their readers made while the reads were
// attributable, each with how it closed the read.
type LineageReads struct {
	Leases int         // leases issued on artifacts of the lineage (before the bound given)
	Writes []ReadWrite // the writes checked against them, by lease then artifact
	// Separate are the artifacts their readers wrote while the reads were
	// attributable that are not in the lineage and were not checked
	// against them: written in another unit of work or under another
	// holder name of the same reader, which the writer declared separate.
	Separate []shredd.ID
	// AttributableUntil is the latest expiry (Unix nanoseconds) of those
	// leases that have a reader, released or not: until then their
	// readers' writes are still theirs to answer for, and may yet be
	// separate or independent ones.
	AttributableUntil int64
}

// ReadWrite is one write checked against a read of the lineage: the lease,
// the artifact written (derivation.RefusedArtifact for a refused write),
// how the write closed the read, and whether the artifact is in the
// subject's lineage (where a named or inherited read must have put it).
type ReadWrite struct {
	Lease, Artifact shredd.ID
	How             string
	InLineage       bool
}

// ReadsOfLineage reads the LineageReads of subject sid: the leases issued
// on artifacts of its lineage before issuedBefore (Unix nanoseconds: the
// forget's barrier time; 0 for all), and their read links.
func (s *Registry) ReadsOfLineage(ctx context.Context, sid envelope.SID, issuedBefore int64) (LineageReads, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration (and its read links) in the tables
		return LineageReads{}, err
	}
	if issuedBefore == 0 {
		issuedBefore = 1<<63 - 1
	}
	floor, err := s.lifeFloor(ctx, sid)
	if err != nil {
		return LineageReads{}, fmt.Errorf("registry: reads of a lineage: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT le.id, r.artifact, r.how,
			(SELECT count(*) FROM `+derivation.LineageAll+` l2 WHERE l2.sid = ?1 AND l2.artifact = r.artifact),
			(CASE WHEN le.reader IS NULL THEN 0 ELSE le.expires_at END)
		FROM `+derivation.LineageAll+` l JOIN leases le ON le.artifact = l.artifact AND le.issued_at < ?2
			LEFT JOIN `+derivation.ReadLinks+` r ON r.lease = le.id
		WHERE l.sid = ?1 AND l.gen >= ?3`, sid[:], issuedBefore, floor)
	if err != nil {
		return LineageReads{}, fmt.Errorf("registry: reads of a lineage: %w", err)
	}
	defer rows.Close()
	var out LineageReads
	leases := map[shredd.ID]bool{}
	for rows.Next() {
		var lease, art []byte
		var how *string
		var in int
		var expires int64
		if err := rows.Scan(&lease, &art, &how, &in, &expires); err != nil {
			return LineageReads{}, fmt.Errorf("registry: reads of a lineage: %w", err)
		}
		out.AttributableUntil = max(out.AttributableUntil, expires)
		var w ReadWrite
		copy(w.Lease[:], lease)
		leases[w.Lease] = true
		if how == nil {
			continue // a lease no write was checked against
		}
		copy(w.Artifact[:], art)
		w.How, w.InLineage = *how, in > 0
		out.Writes = append(out.Writes, w)
	}
	if err := rows.Err(); err != nil {
		return LineageReads{}, fmt.Errorf("registry: reads of a lineage: %w", err)
	}
	out.Leases = len(leases)
	if out.Separate, err = s.separateWrites(ctx, sid, issuedBefore); err != nil {
		return LineageReads{}, err
	}
	slices.SortFunc(out.Writes, func(a, b ReadWrite) int {
		if c := slices.Compare(a.Lease[:], b.Lease[:]); c != 0 {
			return c
		}
		return slices.Compare(a.Artifact[:], b.Artifact[:])
	})
	return out, nil
}

// separateWrites lists the artifacts that the readers of leases on sid's
// lineage (issued before issuedBefore) wrote while a lease was
// attributable (from its issue to its expiry), that are not in the
// lineage and have no read link to the lease: their writes did not answer
// for the read (another unit or holder of the same reader), by id.
func (s *Registry) separateWrites(ctx context.Context, sid envelope.SID, issuedBefore int64) ([]shredd.ID, error) {
	floor, err := s.lifeFloor(ctx, sid)
	if err != nil {
		return nil, fmt.Errorf("registry: reads of a lineage: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT a.id
		FROM `+derivation.LineageAll+` l JOIN leases le ON le.artifact = l.artifact AND le.issued_at < ?2 AND le.reader IS NOT NULL
			JOIN artifacts a ON a.writer = le.reader AND a.created_at >= le.issued_at AND a.created_at < le.expires_at
		WHERE l.sid = ?1 AND l.gen >= ?3
			AND NOT EXISTS (SELECT 1 FROM `+derivation.LineageAll+` l2 WHERE l2.sid = ?1 AND l2.artifact = a.id)
			AND NOT EXISTS (SELECT 1 FROM `+derivation.ReadLinks+` r WHERE r.lease = le.id AND r.artifact = a.id)
		ORDER BY a.id`, sid[:], issuedBefore, floor)
	if err != nil {
		return nil, fmt.Errorf("registry: reads of a lineage: %w", err)
	}
	defer rows.Close()
	var out []shredd.ID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("registry: reads of a lineage: %w", err)
		}
		var id shredd.ID
		copy(id[:], b)
		out = append(out, id)
	}
	return out, rows.Err()
}

// Counts is the number of read links of each kind (shredd.ReadNamed ...).
func (r LineageReads) Counts() map[string]int {
	n := map[string]int{}
	for _, w := range r.Writes {
		n[w.How]++
	}
	return n
}

// Independent lists the artifacts declared independent of a read of the
// lineage, each once, in the order of Writes.
func (r LineageReads) Independent() []shredd.ID {
	var out []shredd.ID
	seen := map[shredd.ID]bool{}
	for _, w := range r.Writes {
		if w.How == shredd.ReadIndependent && !seen[w.Artifact] {
			seen[w.Artifact] = true
			out = append(out, w.Artifact)
		}
	}
	return out
}
