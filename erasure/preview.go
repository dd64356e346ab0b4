package erasure

import (
	"context"
	"fmt"
	"slices"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/keystore"
)

// MaxPreviewArtifacts bounds how many artifacts a forget preview lists; the
// counts are always complete.
const MaxPreviewArtifacts = 10_000

// Preview computes the dry run of forgetting subject: the artifacts that
// will become unreadable, direct and derived (with their distance in hops),
// the collateral (aggregates that also carry other subjects and must be
// rebuilt by their holders), and the plaintext-held artifacts whose holders
// will have to purge them. It writes nothing.
func (s *Service) Preview(ctx context.Context, subject string) (shredd.Preview, error) {
	if err := checkSubject(subject); err != nil {
		return shredd.Preview{}, err
	}
	sid := s.hasher.SID(subject)
	var p shredd.Preview
	if err := s.Settle(ctx); err != nil { // the lineage by subject and the children by parent
		return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
	}
	st, _, err := s.keys.State(ctx, sid)
	if err != nil {
		return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
	}
	p.AlreadyForgotten = st == keystore.SubjectForgotten
	rows, err := s.db.QueryContext(ctx, `SELECT a.id, a.seq, a.kind, a.holder, a.sealed, l.direct,
			(SELECT count(*) - 1 FROM lineage o WHERE o.artifact = l.artifact)
		FROM lineage l JOIN artifacts a ON a.id = l.artifact WHERE l.sid = ?`, sid[:])
	if err != nil {
		return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
	}
	byID := map[shredd.ID]*shredd.PreviewArtifact{}
	seqOf := map[shredd.ID]int64{} // registration order, for the listing
	var order []shredd.ID
	for rows.Next() {
		var a shredd.PreviewArtifact
		var id []byte
		var direct bool
		var seq int64
		if err := rows.Scan(&id, &seq, &a.Kind, &a.Holder, &a.Sealed, &direct, &a.Others); err != nil {
			rows.Close()
			return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
		}
		copy(a.ID[:], id)
		a.Hops = -1
		if direct {
			a.Hops = 0
		}
		byID[a.ID] = &a
		seqOf[a.ID] = seq
		order = append(order, a.ID)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
	}
	// Hops: breadth-first from the direct artifacts over parent edges,
	// within the lineage set.
	frontier := []shredd.ID{}
	for _, id := range order {
		if byID[id].Hops == 0 {
			frontier = append(frontier, id)
		}
	}
	for hops := 1; len(frontier) > 0; hops++ {
		var next []shredd.ID
		for _, parent := range frontier {
			cr, err := s.db.QueryContext(ctx, `SELECT artifact FROM artifact_parents WHERE parent = ?`, parent[:])
			if err != nil {
				return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
			}
			for cr.Next() {
				var b []byte
				if err := cr.Scan(&b); err != nil {
					cr.Close()
					return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
				}
				var child shredd.ID
				copy(child[:], b)
				if a, ok := byID[child]; ok && a.Hops < 0 {
					a.Hops = hops
					next = append(next, child)
				}
			}
			cr.Close()
		}
		frontier = next
	}
	for _, id := range order {
		a := byID[id]
		if a.Hops < 0 {
			// Unreachable: a lineage is inherited along parent edges, so every
			// indirect artifact has a parent chain from a direct one.
			a.Hops = 1
		}
		p.Total++
		if a.Hops == 0 {
			p.Direct++
		} else {
			p.Derived++
		}
		if a.Others > 0 {
			p.Collateral++
		}
		if !a.Sealed {
			p.PlaintextHeld++
		}
	}
	sortPreview(order, byID, seqOf)
	for _, id := range order {
		if len(p.Artifacts) == MaxPreviewArtifacts {
			p.Truncated = true
			break
		}
		p.Artifacts = append(p.Artifacts, *byID[id])
	}
	return p, nil
}

func sortPreview(order []shredd.ID, byID map[shredd.ID]*shredd.PreviewArtifact, seqOf map[shredd.ID]int64) {
	slices.SortFunc(order, func(a, b shredd.ID) int {
		if d := byID[a].Hops - byID[b].Hops; d != 0 {
			return d
		}
		return int(seqOf[a] - seqOf[b])
	})
}
