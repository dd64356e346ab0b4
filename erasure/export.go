package erasure

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/translog"
)

// Export assembles the regulator export of an erased forget
// (bundle.Bundle): the attestation as logged, every log entry of the
// forget's lifecycle (key created, forget committed, holder acks, the
// epoch, erasure attested) with its inclusion proof against one checkpoint
// of the current tree, the public keys, and, when since > 0, a consistency
// proof from tree size since to that checkpoint. A forget not erased gives
// ErrNotErased; since beyond the tree ErrInvalid.
func (s *Evidence) Export(ctx context.Context, id shredd.ID, since int64) (*bundle.Bundle, error) {
	j := s.opts.Journal
	if j == nil {
		return nil, fmt.Errorf("erasure: export: %w", shredd.ErrNoLog)
	}
	id, err := resolveAlias(ctx, s.db, id) // an alias: the kept forget's
	if err != nil {
		return nil, err
	}
	att, err := s.Attestation(ctx, id)
	if err != nil {
		return nil, err
	}
	r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE id=?`, id[:]))
	if err != nil {
		return nil, fmt.Errorf("erasure: export: %w", err)
	}
	idxs, err := s.exportIndexes(ctx, id, &r)
	if err != nil {
		return nil, err
	}
	size, err := j.Log().Size(ctx)
	if err != nil {
		return nil, fmt.Errorf("erasure: export: %w", err)
	}
	if since < 0 || since > size {
		return nil, fmt.Errorf("erasure: export: since=%d, the log has %d entries: %w", since, size, shredd.ErrInvalid)
	}
	// Prefer the tree the witnesses cosigned, when it holds every entry
	// of the export: its checkpoint carries their cosignatures.
	if w, _ := j.Log().WitnessedSize(); w > slices.Max(append(idxs, -1)) && w >= since && w < size {
		size = w
	}
	pub := j.Signer().Public()
	pem, err := attest.MarshalPublicKey(pub)
	if err != nil {
		return nil, err
	}
	b := &bundle.Bundle{Forget: id.String(), Attestation: att, AttestationPub: pem, LogKey: []byte(j.LogKey() + "\n"),
		Created: ts(r.erased)}
	attested := false
	for _, i := range idxs {
		event, err := addExportEntry(ctx, j, b, pub, i, size)
		if err != nil {
			return nil, err
		}
		attested = attested || event == attest.EventErasureAttested
	}
	if !attested {
		return nil, fmt.Errorf("erasure: export: forget %s was erased before the transparency log existed: %w", id, shredd.ErrNoLog)
	}
	if since > 0 {
		hashes, err := j.Log().ProveConsistency(ctx, since, size)
		if err != nil {
			return nil, fmt.Errorf("erasure: export: %w", err)
		}
		b.Consistency = (&translog.ConsistencyProof{Old: since, New: size, Hashes: hashes}).Marshal()
	}
	return b, nil
}

// exportIndexes returns the log indexes of the entries of the forget r
// (id): those the forget logged (committed, holder acks, attested) in
// order, then its key's creation and its epoch, when logged.
func (s *Evidence) exportIndexes(ctx context.Context, id shredd.ID, r *forgetRow) ([]int64, error) {
	idxs, err := journal.ForgetIndexes(ctx, s.db, id)
	if err != nil {
		return nil, fmt.Errorf("erasure: export: %w", err)
	}
	if k, err := journal.KeyCreatedIndex(ctx, s.db, r.sid, uint32(r.gen.Int64)); err != nil {
		return nil, err
	} else if k >= 0 {
		idxs = append(idxs, k)
	}
	if r.epoch.Valid && r.epoch.Int64 > 0 {
		// An epoch index the log cannot give is left out: the export
		// still carries the forget's own entries.
		if e, err := journal.EpochIndex(ctx, s.db, r.epoch.Int64); err == nil && e >= 0 {
			idxs = append(idxs, e)
		}
	}
	return idxs, nil
}

// addExportEntry adds the log entry i to the export b, with its inclusion
// proof in the tree of the given size, and returns its event kind. The
// first entry's proof sets b's checkpoint; every later proof carries it.
func addExportEntry(ctx context.Context, j *journal.Journal, b *bundle.Bundle, pub ed25519.PublicKey, i, size int64) (string, error) {
	data, err := j.Log().Entry(ctx, i)
	if err != nil {
		return "", fmt.Errorf("erasure: export: entry %d: %w", i, err)
	}
	ev, err := attest.OpenEvent(data, pub)
	if err != nil {
		return "", fmt.Errorf("erasure: export: entry %d: %w", i, err)
	}
	proof, err := j.Log().Prove(ctx, i, size)
	if err != nil {
		return "", fmt.Errorf("erasure: export: entry %d: %w", i, err)
	}
	p, err := translog.ParseProof(proof)
	if err != nil {
		return "", fmt.Errorf("erasure: export: %w", err)
	}
	if b.Checkpoint == nil {
		b.Checkpoint = p.Checkpoint
	} else if !bytes.Equal(p.Checkpoint, b.Checkpoint) {
		// The same tree, with a witness's cosignature stapled in
		// between: every proof carries the first checkpoint.
		p.Checkpoint = b.Checkpoint
		proof = p.Marshal()
	}
	b.Entries = append(b.Entries, bundle.Entry{Index: i, Event: ev.Event, Data: data, Proof: proof})
	return ev.Event, nil
}

// TransparencyLog returns the service's transparency log and its note
// verifier key, or nil when it keeps none.
func (s *Evidence) TransparencyLog() (*translog.Log, string) {
	if s.opts.Journal == nil {
		return nil, ""
	}
	return s.opts.Journal.Log(), s.opts.Journal.LogKey()
}
