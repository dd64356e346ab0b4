package derivation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
)

// Verdict states a forget reaches through verification, on top of the
// pipeline states requested, committed and shredded.
const (
	StateErased  = "erased"
	StateOverdue = "overdue"
)

// The five conditions of erasure (DESIGN.md). A forget is erased only when
// each is proven; until then GET /v1/forgets/{id} says which are pending and
// why.
const (
	CondCascadeClosed     = "cascade_closed"
	CondWorkersQuiesced   = "workers_quiesced"
	CondReadPathConverged = "read_path_converged"
	CondClosureIntact     = "closure_intact"
	CondBackupsEpoch      = "backups_epoch"
)

// verification evaluates the five conditions of a committed forget. It reads
// the registry and the key tree and writes nothing.
func (s *Service) verification(ctx context.Context, r forgetRow) ([]Condition, bool, error) {
	now := s.opts.Now()
	var out []Condition
	allOK := true
	add := func(name string, ok bool, okWhy, pendingWhy string) {
		c := Condition{Name: name, Status: "pending", Reason: pendingWhy}
		if ok {
			c.Status, c.Reason = "ok", okWhy
		} else {
			allOK = false
		}
		out = append(out, c)
	}
	if !r.committed.Valid {
		for _, n := range []string{CondCascadeClosed, CondWorkersQuiesced, CondReadPathConverged, CondClosureIntact, CondBackupsEpoch} {
			add(n, false, "", "the forget has not committed yet")
		}
		return out, false, nil
	}
	committed := time.Unix(0, r.committed.Int64)

	// 1. Cascade: every artifact of the lineage is sealed (and so now
	// unreadable), or plaintext-held and purged by its holder.
	var total, held int
	var holders []string
	rows, err := s.db.QueryContext(ctx, `SELECT a.sealed, a.holder FROM lineage l JOIN artifacts a ON a.id = l.artifact WHERE l.sid = ?`, r.sid[:])
	if err != nil {
		return nil, false, fmt.Errorf("derivation: verify: %w", err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var sealed bool
		var holder string
		if err := rows.Scan(&sealed, &holder); err != nil {
			rows.Close()
			return nil, false, fmt.Errorf("derivation: verify: %w", err)
		}
		total++
		if !sealed {
			held++
			if !seen[holder] {
				seen[holder] = true
				holders = append(holders, holder)
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("derivation: verify: %w", err)
	}
	add(CondCascadeClosed, held == 0,
		fmt.Sprintf("all %d artifacts of the lineage are sealed under keys that include the destroyed subject key", total),
		fmt.Sprintf("%d plaintext-held artifacts of the lineage (holders: %s) live outside shredd and have no signed purge ack from their holders", held, strings.Join(holders, ", ")))

	// 2. Workers: no lease issued before the barrier on an artifact of the
	// lineage is still live.
	var live int
	var until int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(max(le.expires_at), 0) FROM leases le
		JOIN lineage l ON l.artifact = le.artifact
		WHERE l.sid = ? AND le.issued_at < ? AND le.released_at IS NULL AND le.expires_at > ?`,
		r.sid[:], committed.UnixNano(), now.UnixNano()).Scan(&live, &until); err != nil {
		return nil, false, fmt.Errorf("derivation: verify: %w", err)
	}
	add(CondWorkersQuiesced, live == 0,
		"no lease issued before the barrier on an artifact of the lineage is live: no worker still holds plaintext it loaded before the forget",
		fmt.Sprintf("%d leases issued before the barrier are live until %s (released, or expiring)", live, time.Unix(0, until).UTC().Format(time.RFC3339)))

	// 3. Read path: the key cache TTL has passed on every node, the root
	// versions that wrapped the subject's keys are gone, and an actual key
	// lookup for the subject fails as shredded.
	tprop := committed.Add(s.keys.CacheTTL())
	lookupFails, lookupWhy := s.lookupFails(ctx, r)
	switch {
	case now.Before(tprop):
		add(CondReadPathConverged, false, "", fmt.Sprintf("other nodes may serve the cached key until %s (cache TTL)", tprop.UTC().Format(time.RFC3339)))
	case !r.shredded.Valid:
		add(CondReadPathConverged, false, "", "the root store still holds key versions that can open the subject's keys (no epoch yet)")
	case !lookupFails:
		add(CondReadPathConverged, false, "", lookupWhy)
	default:
		add(CondReadPathConverged, true, "the cache TTL has passed, the key material is destroyed and "+lookupWhy, "")
	}

	// 4. Closure: every artifact of the lineage has a registered kind.
	var unregistered int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM lineage l JOIN artifacts a ON a.id = l.artifact
		LEFT JOIN kinds k ON k.name = a.kind WHERE l.sid = ? AND k.name IS NULL`, r.sid[:]).Scan(&unregistered); err != nil {
		return nil, false, fmt.Errorf("derivation: verify: %w", err)
	}
	add(CondClosureIntact, unregistered == 0,
		"every artifact of the lineage has a registered kind, and no holder has reported artifacts shredd never registered",
		fmt.Sprintf("%d artifacts of the lineage have an unregistered kind", unregistered))

	// 5. Backups: the epoch that followed the re-key completed (or, with
	// per-subject keys, the subject's key is deleted in Vault).
	why := fmt.Sprintf("root epoch %d completed after the bucket re-key: backups taken before the forget can no longer open the subject's key", r.epoch.Int64)
	if s.keys.PerSubject() {
		why = "the subject's own Transit key is deleted: backups of the database hold only keys nothing can unwrap"
	}
	add(CondBackupsEpoch, r.shredded.Valid, why, "waiting for the root epoch that follows the subject's bucket re-key")
	return out, allOK, nil
}

// lookupFails tries to get the forgotten subject's key through the normal
// path, the one every decrypt takes: it must fail as shredded.
func (s *Service) lookupFails(ctx context.Context, r forgetRow) (bool, string) {
	gen := uint32(r.gen.Int64)
	if gen == 0 {
		return true, "the subject never had a key (a tombstone refuses it)"
	}
	_, err := s.keys.KeyAt(ctx, envelope.Ref{SID: r.sid, Gen: gen})
	switch {
	case errors.Is(err, keystore.ErrShredded), errors.Is(err, keystore.ErrVersionDestroyed):
		return true, "a lookup of the subject's key fails as shredded"
	case err == nil:
		return false, "a lookup of the subject's key still succeeds"
	}
	return false, "the key lookup could not be checked: the key backend did not answer"
}

// Verify evaluates a forget's conditions now and records it erased when all
// of them hold.
func (s *Service) Verify(ctx context.Context, id ID) (Forget, error) {
	r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE id=?`, id[:]))
	if err != nil {
		return s.GetForget(ctx, id) // the same not-found and errors
	}
	if err := s.verifyRow(ctx, r); err != nil {
		return Forget{}, err
	}
	return s.GetForget(ctx, id)
}

func (s *Service) verifyRow(ctx context.Context, r forgetRow) error {
	if r.erased.Valid || r.state != StateShredded {
		return nil
	}
	_, ok, err := s.verification(ctx, r)
	if err != nil || !ok {
		return err
	}
	_, err = s.db.ExecContext(ctx, `UPDATE forgets SET erased_at=? WHERE id=? AND erased_at IS NULL`, s.opts.Now().UnixNano(), r.id[:])
	if err != nil {
		return fmt.Errorf("derivation: verify: %w", err)
	}
	return nil
}

// verifyAll verifies every shredded forget not yet erased.
func (s *Service) verifyAll(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, forgetCols+` WHERE state=? AND erased_at IS NULL`, StateShredded)
	if err != nil {
		return fmt.Errorf("derivation: verify: %w", err)
	}
	var pending []forgetRow
	for rows.Next() {
		r, err := scanForget(rows)
		if err != nil {
			rows.Close()
			return fmt.Errorf("derivation: verify: %w", err)
		}
		pending = append(pending, r)
	}
	rows.Close()
	for _, r := range pending {
		if err := s.verifyRow(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
