package derivation

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
)

// Children lists the settled artifacts that have parent among their
// parents (call Settle first).
func (s *Graph) Children(ctx context.Context, parent shredd.ID) ([]shredd.ID, error) {
	return s.ids(ctx, `SELECT artifact FROM artifact_parents WHERE parent = ?`, parent[:])
}

// Parents returns the parents of artifact id, settled or staged, in id
// order: none for an artifact without parents or never registered.
func (s *Graph) Parents(ctx context.Context, id shredd.ID) ([]shredd.ID, error) {
	// Each statement reads the table and its staging table in one
	// snapshot (Settle moves whole artifacts between them).
	out, err := s.ids(ctx, `SELECT parent FROM artifact_parents WHERE artifact=?1 UNION ALL
		SELECT parent FROM parents_staged WHERE artifact=?1 ORDER BY 1`, id[:])
	if err != nil {
		return nil, fmt.Errorf("derivation: artifact: %w", err)
	}
	return out, nil
}

// ids runs query, whose rows are one artifact id each.
func (s *Graph) ids(ctx context.Context, query string, args ...any) ([]shredd.ID, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []shredd.ID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var id shredd.ID
		copy(id[:], b)
		out = append(out, id)
	}
	return out, rows.Err()
}

// LineageOf returns the lineage of artifact id, settled or staged, in
// subject order: none for an artifact never registered.
func (s *Graph) LineageOf(ctx context.Context, id shredd.ID) ([]envelope.Ref, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sid, gen FROM lineage WHERE artifact=?1 UNION ALL
		SELECT sid, gen FROM lineage_staged WHERE artifact=?1 ORDER BY 1`, id[:])
	if err != nil {
		return nil, fmt.Errorf("derivation: artifact: %w", err)
	}
	defer rows.Close()
	var out []envelope.Ref
	for rows.Next() {
		var b []byte
		var r envelope.Ref
		if err := rows.Scan(&b, &r.Gen); err != nil {
			return nil, err
		}
		copy(r.SID[:], b)
		out = append(out, r)
	}
	return out, rows.Err()
}

// placeholders returns "?1, ?2, ..., ?n": numbered, so that a statement can
// use the same arguments twice.
func placeholders(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?")
		b.WriteString(strconv.Itoa(i + 1))
	}
	return b.String()
}

// maxParentQuery bounds the ids of one LineagesOf query.
const maxParentQuery = 256

// LineagesOf adds the lineages of artifacts ids, settled or staged, to
// out, a few queries for many ids. An artifact never registered is absent
// from out. The lineage rows of an artifact are written with it, in one
// transaction: an artifact has rows exactly when it is registered.
func (s *Graph) LineagesOf(ctx context.Context, ids []shredd.ID, out map[shredd.ID][]envelope.Ref) error {
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), maxParentQuery)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i := range chunk {
			args[i] = chunk[i][:]
		}
		// One statement reads both tables: one snapshot, so that an
		// artifact moving from one to the other (Settle) is read once.
		in := placeholders(len(chunk))
		q := `SELECT artifact, sid, gen FROM lineage WHERE artifact IN (` + in + `) UNION ALL SELECT artifact, sid, gen FROM lineage_staged WHERE artifact IN (` + in + `)`
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("derivation: parent: %w", err)
		}
		for rows.Next() {
			var a, sid []byte
			var gen uint32
			if err := rows.Scan(&a, &sid, &gen); err != nil {
				rows.Close()
				return fmt.Errorf("derivation: parent: %w", err)
			}
			var id shredd.ID
			var r envelope.Ref
			copy(id[:], a)
			copy(r.SID[:], sid)
			r.Gen = gen
			out[id] = append(out[id], r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("derivation: parent: %w", err)
		}
	}
	return nil
}
