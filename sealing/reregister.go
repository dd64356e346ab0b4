package sealing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/registry"
)

// Reregister registers again the artifacts of envelopes that the registry
// lost: a database restored from a backup taken before they were sealed
// holds no row for them, and decrypt refuses them (ErrUnknownArtifact)
// until they are back, so that every readable artifact is one a forget's
// dry run, cascade and proof can find.
//
// Only the envelope's authenticated header is trusted: each envelope is
// opened with the live keys of its lineage and its context (the plaintext
// is cleared at once and never returned), so that an envelope shredd did
// not seal, or whose header was altered, gives ErrEnvelope; a lineage that
// holds a forgotten subject (or a destroyed key generation) gives
// ErrShredded, and nothing of a forgotten subject is ever registered again.
// The artifact is recorded with the header's id, kind and lineage, the
// given holder, and every lineage subject marked direct (an envelope does
// not tell its own subjects from its parents', nor name its parents); the
// registration takes the barrier exactly as Encrypt's does. An artifact the
// registry holds already is answered Known, with nothing written, so that
// the call can be repeated.
func (s *Sealer) Reregister(ctx context.Context, in []shredd.ReregisterInput) ([]shredd.Reregistered, []error) {
	out := make([]shredd.Reregistered, len(in))
	errs := make([]error, len(in))
	if len(in) > maxBatch {
		for i := range errs {
			errs[i] = fmt.Errorf("sealing: reregister: batch of %d items, at most %d: %w", len(in), maxBatch, shredd.ErrTooLarge)
		}
		return out, errs
	}
	envs := make([]*envelope.Envelope, len(in))
	var sids []envelope.SID
	for i, it := range in {
		if envs[i], errs[i] = parseInput(it); errs[i] == nil {
			sids = append(sids, envs[i].Header.Subjects()...)
		}
	}
	unlock := s.reg.RLockSubjects(sids)
	defer unlock()
	first := map[shredd.ID]int{} // the first item of each artifact: later ones wait for its answer
	reqs := make([]registry.Registration, 0, len(in))
	idx := make([]int, 0, len(in))
	now := s.opts.Now()
	for i, env := range envs {
		if errs[i] != nil {
			continue
		}
		h := env.Header
		id := shredd.ID(h.Artifact)
		out[i] = shredd.Reregistered{Artifact: id, Kind: h.Kind, Lineage: len(h.Lineage)}
		if errs[i] = s.verifyEnvelope(ctx, env, in[i].Context); errs[i] != nil {
			continue
		}
		if _, dup := first[id]; dup {
			continue
		}
		first[id] = i
		switch err := s.checkRegistered(ctx, id); {
		case err == nil:
			out[i].Known = true
			continue
		case !errors.Is(err, shredd.ErrUnknownArtifact):
			errs[i] = err
			continue
		}
		reqs = append(reqs, registration(id, headerPlan(h, in[i].Holder), slices.Clone(h.Lineage), true, now))
		idx = append(idx, i)
	}
	// Queue every registration, then wait for each (queueAll): the
	// barrier locks cover them until they are written or refused.
	pending := s.queueAll(ctx, reqs, idx, errs, "reregister")
	for j := range pending {
		i := idx[j]
		if errs[i] = pending[j].Wait(); errs[i] != nil && s.checkRegistered(ctx, reqs[j].ID) == nil {
			// Registered meanwhile by another call: the same outcome.
			errs[i], out[i].Known = nil, true
		}
	}
	// Later items of an artifact already in this batch answer as the first.
	for i, env := range envs {
		if errs[i] != nil || env == nil {
			continue
		}
		if f := first[shredd.ID(env.Header.Artifact)]; f != i {
			out[i], errs[i] = out[f], errs[f]
			out[i].Known = true
		}
	}
	return out, errs
}

// parseInput parses one presented envelope and checks its holder.
func parseInput(it shredd.ReregisterInput) (*envelope.Envelope, error) {
	if it.Holder != "" && !shredd.ValidHolder(it.Holder) {
		return nil, fmt.Errorf("sealing: reregister: holder id: %w", shredd.ErrInvalid)
	}
	var env *envelope.Envelope
	var err error
	switch {
	case it.Ciphertext != "" && it.Binary != nil:
		return nil, fmt.Errorf("sealing: reregister: a text and a binary envelope in one item: %w", shredd.ErrInvalid)
	case it.Binary != nil:
		env, err = envelope.Parse(it.Binary)
	default:
		env, err = envelope.ParseText(it.Ciphertext)
	}
	if err != nil {
		return nil, fmt.Errorf("sealing: reregister: %w: %w", shredd.ErrEnvelope, err)
	}
	return env, nil
}

// verifyEnvelope opens env with the live keys of its lineage and context
// and clears the plaintext: the header is authentic when the AEAD opens,
// since the artifact key is derived from the header and the subject keys.
// Called under the barrier read locks of the lineage.
func (s *Sealer) verifyEnvelope(ctx context.Context, env *envelope.Envelope, context []byte) error {
	keys := make([]envelope.SubjectKey, 0, len(env.Header.Lineage))
	for _, ref := range env.Header.Lineage {
		k, err := s.keys.KeyAt(ctx, ref)
		if err != nil {
			return s.keyErr(ctx, err, env.Header.Lineage)
		}
		keys = append(keys, k)
	}
	pt, err := envelope.Open(env, keys, context)
	clear(pt)
	if err != nil {
		return fmt.Errorf("sealing: reregister: %w: %w", shredd.ErrEnvelope, err)
	}
	return nil
}

// headerPlan is the registration plan of an authenticated header: its kind
// and lineage at the header's generations, every subject direct, no
// parents.
func headerPlan(h envelope.Header, holder string) *plan {
	p := &plan{kind: h.Kind, holder: holder, direct: map[envelope.SID]bool{}, subject: map[envelope.SID]string{},
		lineage: map[envelope.SID]uint32{}}
	for _, r := range h.Lineage {
		p.direct[r.SID] = true
		p.lineage[r.SID] = r.Gen
		p.sids = append(p.sids, r.SID)
	}
	slices.SortFunc(p.sids, func(a, b envelope.SID) int { return bytes.Compare(a[:], b[:]) })
	return p
}
