package erasure

import (
	"context"
	"fmt"
	"slices"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
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
func (s *Eraser) Preview(ctx context.Context, subject string) (shredd.Preview, error) {
	if err := checkSubject(subject); err != nil {
		return shredd.Preview{}, err
	}
	sid := s.hasher.SID(subject)
	var p shredd.Preview
	if err := s.reg.Settle(ctx); err != nil { // the lineage by subject and the children by parent
		return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
	}
	st, _, err := s.keys.State(ctx, sid)
	if err != nil {
		return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
	}
	p.AlreadyForgotten = st == keystore.SubjectForgotten
	deps, err := s.reg.SubjectArtifacts(ctx, sid)
	if err != nil {
		return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
	}
	byID := map[shredd.ID]*shredd.PreviewArtifact{}
	seqOf := map[shredd.ID]int64{} // registration order, for the listing
	var order []shredd.ID
	for _, d := range deps {
		a := shredd.PreviewArtifact{ID: d.ID, Kind: d.Kind, Holder: d.Holder, Sealed: d.Sealed, Others: d.Others, Hops: -1}
		if d.Direct {
			a.Hops = 0
		}
		byID[a.ID] = &a
		seqOf[a.ID] = d.Seq
		order = append(order, a.ID)
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
			children, err := s.reg.Children(ctx, parent)
			if err != nil {
				return shredd.Preview{}, fmt.Errorf("erasure: preview: %w", err)
			}
			for _, child := range children {
				if a, ok := byID[child]; ok && a.Hops < 0 {
					a.Hops = hops
					next = append(next, child)
				}
			}
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
	if p.Reads, err = s.previewReads(ctx, sid); err != nil {
		return shredd.Preview{}, err
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

// previewReads is what shredd observed of the reads of sid's lineage.
func (s *Eraser) previewReads(ctx context.Context, sid envelope.SID) (shredd.PreviewReads, error) {
	lr, err := s.reg.ReadsOfLineage(ctx, sid, 0)
	if err != nil {
		return shredd.PreviewReads{}, fmt.Errorf("erasure: preview: %w", err)
	}
	n, indep := lr.Counts(), lr.Independent()
	return shredd.PreviewReads{Leases: lr.Leases, Named: n[shredd.ReadNamed], Inherited: n[shredd.ReadInherited],
		Independent: n[shredd.ReadIndependent], Refused: n[shredd.ReadRefused],
		IndependentArtifacts: indep[:min(len(indep), MaxPreviewArtifacts)],
		Separate:             len(lr.Separate), SeparateArtifacts: lr.Separate[:min(len(lr.Separate), MaxPreviewArtifacts)]}, nil
}
