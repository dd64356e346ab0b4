package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
)

// Registered reports whether the registry holds artifact id. Artifacts are
// never deleted.
func (s *Registry) Registered(ctx context.Context, id shredd.ID) (bool, error) {
	if _, ok := s.ws.get(id); ok {
		return true, nil
	}
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM artifacts WHERE id=?`, id[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// ArtifactHolder returns the holder of artifact id ("" for none); an
// artifact never registered gives sql.ErrNoRows.
func (s *Registry) ArtifactHolder(ctx context.Context, id shredd.ID) (string, error) {
	if r, ok := s.ws.get(id); ok {
		return r.Holder, nil
	}
	var h string
	err := s.db.QueryRowContext(ctx, `SELECT holder FROM artifacts WHERE id=?`, id[:]).Scan(&h)
	return h, err
}

// GetArtifact returns a registered artifact.
func (s *Registry) GetArtifact(ctx context.Context, id shredd.ID) (shredd.Artifact, error) {
	if _, ok := s.ws.get(id); ok {
		// Its registration order is given by the fold.
		if err := s.Fold(ctx); err != nil {
			return shredd.Artifact{}, err
		}
	}
	a := shredd.Artifact{ID: id}
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT seq, kind, holder, sealed, created_at FROM artifacts WHERE id=?`, id[:]).
		Scan(&a.Seq, &a.Kind, &a.Holder, &a.Sealed, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Artifact{}, fmt.Errorf("sealing: artifact %s: %w", id, shredd.ErrNotFound)
	}
	if err != nil {
		return shredd.Artifact{}, fmt.Errorf("sealing: artifact: %w", err)
	}
	a.CreatedAt = time.Unix(0, created).UTC()
	// Each statement reads the table and its staging table in one
	// snapshot (Settle moves whole artifacts between them).
	rows, err := s.db.QueryContext(ctx, `SELECT parent FROM artifact_parents WHERE artifact=?1 UNION ALL
		SELECT parent FROM parents_staged WHERE artifact=?1 ORDER BY 1`, id[:])
	if err != nil {
		return shredd.Artifact{}, fmt.Errorf("sealing: artifact: %w", err)
	}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return shredd.Artifact{}, err
		}
		var p shredd.ID
		copy(p[:], b)
		a.Parents = append(a.Parents, p)
	}
	rows.Close()
	refs, err := s.LineageOf(ctx, id)
	if err != nil {
		return shredd.Artifact{}, err
	}
	a.Lineage = len(refs)
	return a, nil
}

// LineageOf returns the lineage of a registered artifact, sorted by sid
// (none for an id it does not know).
func (s *Registry) LineageOf(ctx context.Context, id shredd.ID) ([]envelope.Ref, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT sid, gen FROM lineage WHERE artifact=?1 UNION ALL
		SELECT sid, gen FROM lineage_staged WHERE artifact=?1 ORDER BY 1`, id[:])
	if err != nil {
		return nil, fmt.Errorf("sealing: artifact: %w", err)
	}
	defer rows.Close()
	var refs []envelope.Ref
	for rows.Next() {
		var b []byte
		var r envelope.Ref
		if err := rows.Scan(&b, &r.Gen); err != nil {
			return nil, err
		}
		copy(r.SID[:], b)
		refs = append(refs, r)
	}
	return refs, rows.Err()
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

// maxParentQuery bounds the ids of one parentsOf query.
const maxParentQuery = 256

// ParentsOf reads the lineages of parent artifacts, a few queries for many
// parents. A parent never registered is absent from the map. The lineage
// rows of an artifact are written with it, in one transaction: an artifact
// has rows exactly when it is registered.
func (s *Registry) ParentsOf(ctx context.Context, ids []shredd.ID) (map[shredd.ID][]envelope.Ref, error) {
	out := make(map[shredd.ID][]envelope.Ref, len(ids))
	if s.ws != nil {
		// Parents still in the WAL's tail are read there; a parent that
		// leaves the tail meanwhile is in the tables, read below.
		rest := make([]shredd.ID, 0, len(ids))
		for _, id := range ids {
			if r, ok := s.ws.get(id); ok {
				out[id] = r.Lineage
			} else {
				rest = append(rest, id)
			}
		}
		ids = rest
	}
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
			return nil, fmt.Errorf("sealing: parent: %w", err)
		}
		for rows.Next() {
			var a, sid []byte
			var gen uint32
			if err := rows.Scan(&a, &sid, &gen); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sealing: parent: %w", err)
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
			return nil, fmt.Errorf("sealing: parent: %w", err)
		}
	}
	return out, nil
}
