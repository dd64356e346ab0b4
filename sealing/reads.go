package sealing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/registry"
)

// The writer's reads (docs/api.md "What a read costs a writer"): a write
// is checked against the leases its writer holds (registry.ReadsOf: same
// token, matching holder and unit, not expired, released or not). Each
// must be named (the source's leases or parents), or declared independent
// (IndependentOf, or Independent for every one); the rest are an
// undeclared derivation, which the token's policy refuses
// (shredd.UndeclaredDerivationError, kept by registry.RecordRefused) or
// inherits (the leases' artifacts become parents). The outcome, one
// shredd.Read per lease, is registered with the artifact.

// readKey names one writer's reads within a batch (readCache).
type readKey struct {
	token, holder, unit string
	before              time.Time
}

// readCache holds the reads of the writers of one batch, read once.
type readCache map[readKey][]shredd.Lease

// readsLimit bounds the leases a check reads beyond those the source
// names or declares (MaxLiveReads), and one more to tell that there are
// more: a write whose reader holds more is refused (413), whatever it
// declares.
const readsLimit = MaxLiveReads + 1

// MaxLiveReads bounds the attributable reads one write answers for: the
// read links it registers, and what it may inherit or declare independent.
const MaxLiveReads = 4096

// checkReads checks src against its writer's reads, and returns them with
// how src closes each; with the inherit policy, src's parents gain the
// undeclared leases' artifacts. A source without a reader is not checked.
func (s *Sealer) checkReads(ctx context.Context, src *shredd.Source, cache readCache) ([]shredd.Read, error) {
	if src.Reader == "" {
		return nil, nil
	}
	if src.Unit != "" && !shredd.ValidUnit(src.Unit) {
		return nil, fmt.Errorf("sealing: unit id: %w", shredd.ErrInvalid)
	}
	if len(src.IndependentOf) > registry.MaxParents {
		return nil, fmt.Errorf("sealing: %d independent_of leases, at most %d: %w", len(src.IndependentOf), registry.MaxParents, shredd.ErrTooLarge)
	}
	held, err := s.heldReads(ctx, src, cache)
	if err != nil {
		return nil, err
	}
	reads := make([]shredd.Read, 0, len(held))
	var undeclared []shredd.Lease
	for _, l := range held {
		switch {
		case slices.Contains(src.Leases, l.ID) || slices.Contains(src.Parents, l.Artifact):
			reads = append(reads, shredd.Read{Lease: l.ID, How: shredd.ReadNamed})
		case src.Independent || slices.Contains(src.IndependentOf, l.ID):
			reads = append(reads, shredd.Read{Lease: l.ID, How: shredd.ReadIndependent})
		default:
			undeclared = append(undeclared, l)
		}
	}
	more := len(held) == declared(src)+readsLimit // the query's limit: there may be more
	if len(undeclared) == 0 {
		if more {
			return nil, fmt.Errorf("sealing: the writer holds more than %d attributable reads, more than one write answers for: do independent work in its own unit of work: %w", MaxLiveReads, shredd.ErrTooLarge)
		}
		return reads, nil
	}
	if !src.InheritReads {
		return nil, s.refuse(ctx, undeclared, more)
	}
	parents := slices.Clone(src.Parents)
	for _, l := range undeclared {
		if !slices.Contains(parents, l.Artifact) { // many reads of one artifact are one parent
			parents = append(parents, l.Artifact)
		}
		reads = append(reads, shredd.Read{Lease: l.ID, How: shredd.ReadInherited})
	}
	if more || len(parents) > registry.MaxParents {
		// Refused like an undeclared write (kept, and the reads extended),
		// as too large to inherit.
		if err := s.refuse(ctx, undeclared, more); err != nil && !errors.Is(err, shredd.ErrUndeclaredDerivation) {
			return nil, err
		}
		return nil, fmt.Errorf("sealing: %d undeclared reads of %d artifacts to inherit, at most %d parents: %w", len(undeclared), len(parents), registry.MaxParents, shredd.ErrTooLarge)
	}
	src.Parents = parents
	return reads, nil
}

// heldReads returns the leases src's writer holds, read once per writer of
// a batch (cache, when not nil).
func (s *Sealer) heldReads(ctx context.Context, src *shredd.Source, cache readCache) ([]shredd.Lease, error) {
	k := readKey{src.Reader, src.Holder, src.Unit, src.ReadsBefore}
	plain := cache != nil && declared(src) == 0 // a source that names nothing may share the batch's read
	if held, ok := cache[k]; ok && plain {
		return held, nil
	}
	held, err := s.reg.ReadsOf(ctx, shredd.Reader{Token: src.Reader, Holder: src.Holder, Unit: src.Unit}, src.ReadsBefore, declared(src)+readsLimit)
	if err != nil {
		return nil, err
	}
	if plain {
		cache[k] = held
	}
	return held, nil
}

// declared is the number of leases and parents src names or declares
// independent: room the read of its writer's leases leaves for them.
func declared(src *shredd.Source) int {
	return len(src.Leases) + len(src.Parents) + len(src.IndependentOf)
}

// refuse keeps the refusal of a write that left the leases undeclared
// (more: and others beyond them) and returns its error.
func (s *Sealer) refuse(ctx context.Context, undeclared []shredd.Lease, more bool) error {
	ids := make([]shredd.ID, len(undeclared))
	for i, l := range undeclared {
		ids[i] = l.ID
	}
	slices.SortFunc(ids, func(a, b shredd.ID) int { return slices.Compare(a[:], b[:]) })
	if err := s.reg.RecordRefused(ctx, ids); err != nil {
		return err
	}
	e := &shredd.UndeclaredDerivationError{Count: len(ids), Leases: ids[:min(len(ids), shredd.MaxListedReads)], More: more}
	return fmt.Errorf("sealing: %w", e)
}
