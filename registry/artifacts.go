package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
		return shredd.Artifact{}, fmt.Errorf("registry: artifact %s: %w", id, shredd.ErrNotFound)
	}
	if err != nil {
		return shredd.Artifact{}, fmt.Errorf("registry: artifact: %w", err)
	}
	a.CreatedAt = time.Unix(0, created).UTC()
	if a.Parents, err = s.graph.Parents(ctx, id); err != nil {
		return shredd.Artifact{}, err
	}
	refs, err := s.graph.LineageOf(ctx, id)
	if err != nil {
		return shredd.Artifact{}, err
	}
	a.Lineage = len(refs)
	if a.Reads, err = s.graph.ReadsOf(ctx, id); err != nil {
		return shredd.Artifact{}, err
	}
	return a, nil
}

// LineageOf returns the lineage of a registered artifact, sorted by sid
// (none for an id it does not know).
func (s *Registry) LineageOf(ctx context.Context, id shredd.ID) ([]envelope.Ref, error) {
	return s.graph.LineageOf(ctx, id)
}

// ParentsOf reads the lineages of parent artifacts, a few queries for many
// parents (derivation.Graph.LineagesOf). A parent never registered is
// absent from the map.
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
	if err := s.graph.LineagesOf(ctx, ids, out); err != nil {
		return nil, err
	}
	return out, nil
}
