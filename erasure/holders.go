package erasure

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/storage"
)

// Holders keeps the holders of plaintext-held artifacts: their keys, the
// purge work each must do for the open forgets, their signed acks and
// their inventories. An ack or an inventory wakes the background work of
// the Eraser it shares its state with, which verifies what they close or
// block.
type Holders struct {
	*core
}

var _ shredd.Holders = (*Holders)(nil)

// NewHolders returns the holders' side of the erasure e runs: the same
// database, registry and clock, and e's background work to wake.
func NewHolders(e *Eraser) *Holders { return &Holders{core: e.core} }

// MaxAckArtifacts bounds the artifacts of one ack or inventory report.
const MaxAckArtifacts = 100_000

// RegisterHolder records a holder and its Ed25519 public key. Registering
// the same key again is a no-op; another key for a known holder is
// ErrConflict (keys are not replaced silently: old acks stand on them).
func (s *Holders) RegisterHolder(ctx context.Context, id string, pub []byte) (shredd.Holder, bool, error) {
	if !shredd.ValidHolder(id) {
		return shredd.Holder{}, false, fmt.Errorf("erasure: holder id: %w", shredd.ErrInvalid)
	}
	if len(pub) != ed25519.PublicKeySize {
		return shredd.Holder{}, false, fmt.Errorf("erasure: holder key of %d bytes, want an Ed25519 public key (%d): %w", len(pub), ed25519.PublicKeySize, shredd.ErrInvalid)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO holders(id, public_key, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, id, pub, s.opts.Now().UnixNano())
	if err != nil {
		return shredd.Holder{}, false, fmt.Errorf("erasure: register holder: %w", err)
	}
	created, _ := res.RowsAffected()
	h, err := s.GetHolder(ctx, id)
	if err != nil {
		return shredd.Holder{}, false, err
	}
	if !bytes.Equal(h.PublicKey, pub) {
		return shredd.Holder{}, false, fmt.Errorf("erasure: holder %s is registered with another key: %w", id, shredd.ErrConflict)
	}
	return h, created == 1, nil
}

// GetHolder returns a registered holder.
func (s *Holders) GetHolder(ctx context.Context, id string) (shredd.Holder, error) {
	h := shredd.Holder{ID: id}
	var pub []byte
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT public_key, created_at FROM holders WHERE id=?`, id).Scan(&pub, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Holder{}, fmt.Errorf("erasure: holder: %w", shredd.ErrNotFound)
	}
	if err != nil {
		return shredd.Holder{}, fmt.Errorf("erasure: holder: %w", err)
	}
	h.PublicKey, h.CreatedAt = pub, time.Unix(0, created).UTC()
	return h, nil
}

// AckPayload returns the exact bytes a holder signs to acknowledge that it
// purged artifacts for a forget: attest.AckMessage, the format the offline
// verifier checks in attestations (a label, the forget, the holder and the
// sorted artifact ids, one per line).
func AckPayload(forget shredd.ID, holder string, artifacts []shredd.ID) []byte {
	ids := make([]string, len(artifacts))
	for i, a := range artifacts {
		ids[i] = a.String()
	}
	slices.Sort(ids)
	return attest.AckMessage(forget.String(), holder, slices.Compact(ids))
}

// heldBy returns the plaintext-held artifacts of a forget's lineage held by
// holder ("" for every holder), by holder: settled or staged (lineage_all).
func (c *core) heldBy(ctx context.Context, r forgetRow, holder string) (map[string][]shredd.ID, error) {
	out, err := c.reg.HeldBy(ctx, r.sid, holder)
	if err != nil {
		return nil, fmt.Errorf("erasure: purges: %w", err)
	}
	return out, nil
}

// ackedSet returns the artifacts of a forget that signed acks cover.
func (c *core) ackedSet(ctx context.Context, forget shredd.ID) (map[shredd.ID]bool, error) {
	out, err := idSet(ctx, c.db, `SELECT artifact FROM acked WHERE forget=?`, forget[:])
	if err != nil {
		return nil, fmt.Errorf("erasure: acks: %w", err)
	}
	return out, nil
}

// idSet runs query on q, whose rows are one id each, and returns the ids
// (none on an error).
func idSet(ctx context.Context, q storage.Querier, query string, args ...any) (map[shredd.ID]bool, error) {
	bs, err := storage.Column[[]byte](ctx, q, query, args...)
	if err != nil {
		return nil, err
	}
	out := make(map[shredd.ID]bool, len(bs))
	for _, b := range bs {
		var id shredd.ID
		copy(id[:], b)
		out[id] = true
	}
	return out, nil
}

// ackedAndBreaks is ackedSet of each of forgets and closureBreaks, in one
// statement (one round trip, one snapshot), for a verification.
// (PostgreSQL types a union's columns pair by pair from the left: the
// typed branch first.)
func (c *core) ackedAndBreaks(ctx context.Context, forgets []shredd.ID) (map[shredd.ID]map[shredd.ID]bool, []string, error) {
	args := make([]any, len(forgets))
	for i, id := range forgets {
		args[i] = id[:]
	}
	rows, err := c.db.QueryContext(ctx, `SELECT forget, artifact, NULL AS holder FROM acked
			WHERE forget IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(forgets)), ", ")+`)
		UNION ALL SELECT NULL, NULL, holder FROM inventories WHERE unknown_artifacts > 0 OR unknown_kinds > 0
		ORDER BY holder`, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("erasure: acks: %w", err)
	}
	defer rows.Close()
	acked := make(map[shredd.ID]map[shredd.ID]bool, len(forgets))
	for _, id := range forgets {
		acked[id] = map[shredd.ID]bool{}
	}
	var breaks []string
	for rows.Next() {
		var fb, ab []byte
		var h sql.NullString
		if err := rows.Scan(&fb, &ab, &h); err != nil {
			return nil, nil, fmt.Errorf("erasure: acks: %w", err)
		}
		if h.Valid {
			breaks = append(breaks, h.String)
			continue
		}
		var forget, artifact shredd.ID
		copy(forget[:], fb)
		copy(artifact[:], ab)
		if set := acked[forget]; set != nil {
			set[artifact] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("erasure: acks: %w", err)
	}
	return acked, breaks, nil
}

// Purges lists, per open forget, the plaintext-held artifacts holder must
// still purge and acknowledge.
func (s *Holders) Purges(ctx context.Context, holder string) ([]shredd.Purge, error) {
	if _, err := s.GetHolder(ctx, holder); err != nil {
		return nil, err
	}
	open, err := s.queryForgets(ctx, ` WHERE committed_at IS NOT NULL AND erased_at IS NULL ORDER BY requested_at`)
	if err != nil {
		return nil, err
	}
	out := []shredd.Purge{}
	for _, r := range open {
		held, err := s.heldBy(ctx, r, holder)
		if err != nil {
			return nil, err
		}
		acked, err := s.ackedSet(ctx, r.id)
		if err != nil {
			return nil, err
		}
		p := shredd.Purge{Forget: r.id}
		for _, a := range held[holder] {
			if !acked[a] {
				p.Artifacts = append(p.Artifacts, a)
			}
		}
		if len(p.Artifacts) > 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

// Ack records a holder's signed purge ack for a forget. The signature must
// verify under the holder's registered key over AckPayload; every artifact
// must be a plaintext-held artifact of this holder in the forget's lineage
// (a sealed one needs no ack, another holder's is ErrForbidden), and not
// closed by an earlier ack (ErrConflict: each artifact is closed by exactly
// one signed ack; sending the same ack again is a no-op). An ack that omits
// some of the holder's artifacts is accepted, and those stay open: Missing
// lists them. A delete ack alone never closes anything it does not name.
func (s *Holders) Ack(ctx context.Context, forget shredd.ID, holder string, artifacts []shredd.ID, sig []byte) (shredd.AckResult, error) {
	if len(artifacts) == 0 || len(artifacts) > MaxAckArtifacts {
		return shredd.AckResult{}, fmt.Errorf("erasure: an ack names 1 to %d artifacts: %w", MaxAckArtifacts, shredd.ErrInvalid)
	}
	h, err := s.GetHolder(ctx, holder)
	if err != nil {
		return shredd.AckResult{}, err
	}
	// An alias names the kept forget, whose id the signature must cover:
	// the attestation carries the ack under that id.
	if forget, err = resolveAlias(ctx, s.db, forget); err != nil {
		return shredd.AckResult{}, err
	}
	r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE id=?`, forget[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.AckResult{}, fmt.Errorf("erasure: forget %s: %w", forget, shredd.ErrNotFound)
	}
	if err != nil {
		return shredd.AckResult{}, fmt.Errorf("erasure: ack: %w", err)
	}
	payload := AckPayload(forget, holder, artifacts)
	if !ed25519.Verify(h.PublicKey, payload, sig) {
		return shredd.AckResult{}, fmt.Errorf("erasure: the ack's signature does not verify under holder %s's key: %w", holder, shredd.ErrSignature)
	}
	all, err := s.heldBy(ctx, r, "")
	if err != nil {
		return shredd.AckResult{}, err
	}
	owner := map[shredd.ID]string{}
	for hh, ids := range all {
		for _, id := range ids {
			owner[id] = hh
		}
	}
	for _, a := range artifacts {
		switch o, ok := owner[a]; {
		case !ok:
			return shredd.AckResult{}, fmt.Errorf("erasure: artifact %s is not a plaintext-held artifact of this forget's lineage: %w", a, shredd.ErrInvalid)
		case o != holder:
			return shredd.AckResult{}, fmt.Errorf("erasure: artifact %s belongs to another holder: %w", a, shredd.ErrForbidden)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return shredd.AckResult{}, fmt.Errorf("erasure: ack: %w", err)
	}
	defer tx.Rollback()
	var dup int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM holder_acks WHERE forget=? AND holder=? AND payload=?`, forget[:], holder, payload).Scan(&dup); err != nil {
		return shredd.AckResult{}, fmt.Errorf("erasure: ack: %w", err)
	}
	if dup == 0 {
		for _, a := range artifacts {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM acked WHERE forget=? AND artifact=?`, forget[:], a[:]).Scan(&n); err != nil {
				return shredd.AckResult{}, fmt.Errorf("erasure: ack: %w", err)
			}
			if n > 0 {
				return shredd.AckResult{}, fmt.Errorf("erasure: artifact %s is already closed by an earlier ack: %w", a, shredd.ErrConflict)
			}
		}
		names := make([]string, len(artifacts))
		for i, a := range artifacts {
			names[i] = a.String()
		}
		slices.Sort(names)
		names = slices.Compact(names)
		var ackID int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO holder_acks(forget, holder, artifacts, payload, signature, received_at) VALUES (?, ?, ?, ?, ?, ?)
			RETURNING id`, forget[:], holder, strings.Join(names, ","), payload, sig, s.opts.Now().UnixNano()).Scan(&ackID); err != nil {
			return shredd.AckResult{}, fmt.Errorf("erasure: ack: %w", err)
		}
		for _, a := range artifacts {
			if _, err := tx.ExecContext(ctx, `INSERT INTO acked(forget, artifact, holder, ack) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, forget[:], a[:], holder, ackID); err != nil {
				return shredd.AckResult{}, fmt.Errorf("erasure: ack: %w", err)
			}
		}
		if j := s.opts.Journal; j != nil {
			ev := attest.NewAckEvent(forget.String(), attest.HolderAck{Holder: holder, PublicKey: h.PublicKey, Artifacts: names, Signature: sig})
			if err := j.AppendForget(ctx, tx, forget, attest.Event{Event: attest.EventHolderAck, Ack: &ev}); err != nil {
				return shredd.AckResult{}, err
			}
		}
		if err := tx.Commit(); err != nil {
			return shredd.AckResult{}, fmt.Errorf("erasure: ack: %w", err)
		}
	}
	return s.afterAck(ctx, forget, artifacts, all[holder])
}

// afterAck answers an ack: what it closed, what the holder still owes of
// held; a holder that answers probes is asked now (probeUpkeep).
func (s *Holders) afterAck(ctx context.Context, forget shredd.ID, artifacts, held []shredd.ID) (shredd.AckResult, error) {
	if err := s.probeUpkeep(ctx); err != nil {
		return shredd.AckResult{}, err
	}
	acked, err := s.ackedSet(ctx, forget)
	if err != nil {
		return shredd.AckResult{}, err
	}
	res := shredd.AckResult{Closed: slices.Clone(artifacts)}
	for _, a := range held {
		if !acked[a] {
			res.Missing = append(res.Missing, a)
		}
	}
	s.wake()
	return res, nil
}

// ReportInventory records a holder's inventory. Any artifact shredd never
// registered for this holder, of a kind it never registered, or that the
// holder acked as purged (its ack was false), breaks the closure of every
// open forget: they are blocked until the holder reports a clean inventory.
// A forget already erased stays erased (its attestation is issued); the
// report's ContradictedAcks tells the operator.
func (s *Holders) ReportInventory(ctx context.Context, holder string, items []shredd.InventoryItem) (shredd.Inventory, error) {
	if _, err := s.GetHolder(ctx, holder); err != nil {
		return shredd.Inventory{}, err
	}
	if len(items) > MaxAckArtifacts {
		return shredd.Inventory{}, fmt.Errorf("erasure: inventory of %d items, at most %d: %w", len(items), MaxAckArtifacts, shredd.ErrTooLarge)
	}
	inv := shredd.Inventory{Items: len(items)}
	kinds := map[string]bool{}
	for _, it := range items {
		id, err := shredd.ParseID(it.ID)
		known := err == nil
		if known {
			h, err := s.reg.ArtifactHolder(ctx, id)
			known = err == nil && h == holder
		}
		if !known {
			inv.UnknownArtifact = append(inv.UnknownArtifact, truncate(it.ID))
		} else {
			// Still holding an artifact it acked as purged: the ack was false.
			var n int
			if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM acked WHERE artifact=? AND holder=?`, id[:], holder).Scan(&n); err != nil {
				return shredd.Inventory{}, fmt.Errorf("erasure: inventory: %w", err)
			}
			if n > 0 {
				inv.ContradictedAcks = append(inv.ContradictedAcks, id.String())
			}
		}
		if _, seen := kinds[it.Kind]; !seen {
			ok, err := s.reg.KindRegistered(ctx, it.Kind)
			kinds[it.Kind] = err == nil && ok
			if !kinds[it.Kind] {
				inv.UnknownKind = append(inv.UnknownKind, truncate(it.Kind))
			}
		}
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO inventories(holder, reported_at, items, unknown_artifacts, unknown_kinds) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(holder) DO UPDATE SET reported_at=excluded.reported_at, items=excluded.items,
		unknown_artifacts=excluded.unknown_artifacts, unknown_kinds=excluded.unknown_kinds`,
		holder, s.opts.Now().UnixNano(), inv.Items, len(inv.UnknownArtifact)+len(inv.ContradictedAcks), len(inv.UnknownKind)); err != nil {
		return shredd.Inventory{}, fmt.Errorf("erasure: inventory: %w", err)
	}
	s.wake()
	return inv, nil
}

// closureBreaks lists the holders whose latest inventory holds artifacts or
// kinds shredd never registered.
func (c *core) closureBreaks(ctx context.Context) ([]string, error) {
	out, err := storage.Column[string](ctx, c.db, `SELECT holder FROM inventories WHERE unknown_artifacts > 0 OR unknown_kinds > 0 ORDER BY holder`)
	if err != nil {
		return nil, fmt.Errorf("erasure: inventories: %w", err)
	}
	return out, nil
}
