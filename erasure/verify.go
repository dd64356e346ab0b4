package erasure

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/registry"
)

// rootRead is the root store's report of its versions, read from the root
// store itself (keystore.Shredder.RootVersions) at most once for one pass
// of verification: a listing of many forgets or a background pass asks
// the root store once, and never judges from a node's earlier read (on
// many nodes, another node's epoch changed the root store since then).
// The zero value is ready; a nil *rootRead reads afresh at every call.
type rootRead struct {
	v    keystore.Versions
	err  error
	done bool
}

// versions returns the root store's versions, read on first use.
func (rr *rootRead) versions(ctx context.Context, shred *keystore.Shredder) (keystore.Versions, error) {
	if rr == nil {
		return shred.RootVersions(ctx)
	}
	if !rr.done {
		rr.v, rr.err = shred.RootVersions(ctx)
		rr.done = rr.err == nil // a failed read is tried again by the next forget of the pass
	}
	return rr.v, rr.err
}

// verifyFacts is what a committed forget's verification reads of the
// database (readFacts): the lineage, the acks and the inventories, the
// nodes' convergence. The forgets of a group commit have theirs read
// together, a statement for all of them.
type verifyFacts struct {
	lineage registry.LineageFacts
	reads   registry.LineageReads
	acked   map[shredd.ID]bool
	breaks  []string
	conv    keystore.Convergence
	probes  map[string][]probeRow    // by holder
	compact map[string]time.Duration // the holders that answer probes
}

// readFacts reads the verifyFacts of the committed forgets rs, in three
// statements whatever their number, as of now.
func readFacts(ctx context.Context, s *Eraser, rs []forgetRow, now time.Time) ([]verifyFacts, error) {
	sids, ids := make([]envelope.SID, len(rs)), make([]shredd.ID, len(rs))
	issued, committed := make([]int64, len(rs)), make([]time.Time, len(rs))
	for i, r := range rs {
		sids[i], ids[i], issued[i], committed[i] = r.sid, r.id, r.committed.Int64, time.Unix(0, r.committed.Int64)
	}
	lineage, err := s.reg.LineageFactsOf(ctx, sids, issued, now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("erasure: verify: %w", err)
	}
	acked, breaks, err := s.ackedAndBreaks(ctx, ids)
	if err != nil {
		return nil, err
	}
	conv, err := s.follow.Converged(ctx, sids, committed, now)
	if err != nil {
		return nil, fmt.Errorf("erasure: verify: %w", err)
	}
	pf, err := s.readProbeFacts(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]verifyFacts, len(rs))
	for i, r := range rs {
		out[i] = verifyFacts{lineage: lineage[i], acked: acked[r.id], breaks: breaks, conv: conv[i], probes: pf.probes[r.id], compact: pf.compact}
		if out[i].reads, err = s.reg.ReadsOfLineage(ctx, r.sid, issued[i]); err != nil {
			return nil, fmt.Errorf("erasure: verify: %w", err)
		}
	}
	return out, nil
}

// verification evaluates the five conditions of a committed forget. It reads
// the registry and the key tree and writes nothing: the lineage by subject
// through lineage_all, the settled and the staged rows (registry.Registry.Settle), so
// that a forget's answer never waits for a settle. The root store's
// versions come from rr (read afresh for the pass).
// The facts are judged from facts when not nil (read with a group's:
// readFacts), else from r's own read now.
func (s *Eraser) verification(ctx context.Context, r forgetRow, rr *rootRead, facts *verifyFacts) ([]shredd.Condition, bool, error) {
	now := s.opts.Now()
	var out []shredd.Condition
	allOK := true
	add := func(name string, ok bool, okWhy, pendingWhy string) {
		c := shredd.Condition{Name: name, Status: "pending", Reason: pendingWhy}
		if ok {
			c.Status, c.Reason = "ok", okWhy
		} else {
			allOK = false
		}
		out = append(out, c)
	}
	if !r.committed.Valid {
		for _, n := range []string{shredd.CondCascadeClosed, shredd.CondWorkersQuiesced, shredd.CondReadPathConverged, shredd.CondClosureIntact, shredd.CondBackupsEpoch} {
			add(n, false, "", "the forget has not committed yet")
		}
		return out, false, nil
	}
	if facts == nil {
		fs, err := readFacts(ctx, s, []forgetRow{r}, now)
		if err != nil {
			return nil, false, err
		}
		facts = &fs[0]
	}

	// 1. Cascade: every artifact of the lineage is sealed (and so now
	// unreadable), or plaintext-held and named in its holder's signed ack.
	total, held, acked := facts.lineage.Total, facts.lineage.Held, facts.acked
	var open, nheld, probed int
	var waiting, owing, asking []string
	for h, ids := range held {
		n := 0
		for _, id := range ids {
			nheld++
			if !acked[id] {
				n++
			}
		}
		if n > 0 {
			open += n
			waiting = append(waiting, fmt.Sprintf("%s (%d)", h, n))
			owing = append(owing, h)
			continue
		}
		// Acked in full: a holder that answers probes is closed only by a
		// clean probe of its retrieval path after its compaction interval.
		if facts.gated(h) {
			probed++
			if closed, why := probeState(facts.probes[h], now.UnixNano()); !closed {
				asking = append(asking, h+": "+why)
				owing = append(owing, h)
			}
		}
	}
	slices.Sort(waiting)
	slices.Sort(owing)
	slices.Sort(asking)
	pendingWhy := fmt.Sprintf("%d plaintext-held artifacts of the lineage have no signed purge ack from their holders: %s", open, strings.Join(waiting, ", "))
	if open == 0 {
		pendingWhy = "holders acked, but their probes do not show their retrieval paths clean: " + strings.Join(asking, "; ")
	} else if len(asking) > 0 {
		pendingWhy += "; and probes do not show these clean: " + strings.Join(asking, "; ")
	}
	okWhy := fmt.Sprintf("all %d artifacts of the lineage are closed: %d sealed under keys that include the destroyed subject key, %d plaintext-held purged with their holders' signed acks", total, total-nheld, nheld)
	if probed > 0 {
		okWhy += fmt.Sprintf(" (and the retrieval paths of %d of their holders probed clean after their compaction intervals)", probed)
	}
	add(shredd.CondCascadeClosed, open == 0 && len(asking) == 0, okWhy, pendingWhy)
	out[len(out)-1].Holders = owing

	// 2. Workers: no lease issued before the barrier on an artifact of the
	// lineage is still live.
	var live int
	var until int64
	var named []string
	for _, l := range facts.lineage.Leases {
		live++
		until = max(until, l.ExpiresAt)
		if len(named) < 5 {
			holder := l.Holder
			if holder == "" {
				holder = "unnamed holder"
			}
			named = append(named, fmt.Sprintf("lease %s (%s)", l.ID, holder))
		}
	}
	if live > len(named) {
		named = append(named, fmt.Sprintf("and %d more", live-len(named)))
	}
	add(shredd.CondWorkersQuiesced, live == 0,
		"no lease issued before the barrier on an artifact of the lineage is live: no worker still holds plaintext it loaded before the forget",
		fmt.Sprintf("%d leases issued before the barrier are live until %s (released, or expiring): %s", live,
			time.Unix(0, until).UTC().Format(time.RFC3339), strings.Join(named, ", ")))

	// 3. Read path: every node's key cache has let go of the subject's keys
	// (the eviction applied, or the cache TTL passed), the root versions
	// that wrapped them are gone, and an actual key lookup for the subject
	// fails as shredded.
	converged, convergedWhy := facts.conv.OK, facts.conv.Why
	switch {
	case !converged:
		add(shredd.CondReadPathConverged, false, "", convergedWhy)
	case !r.shredded.Valid:
		add(shredd.CondReadPathConverged, false, "", "the root store still holds key versions that can open the subject's keys (no epoch yet)")
	default:
		// The lookup only once it can decide the condition: while the
		// condition waits for the nodes or the epoch, its answer is not read.
		if fails, lookupWhy := s.lookupFails(ctx, r); !fails {
			add(shredd.CondReadPathConverged, false, "", lookupWhy)
		} else if gone, why := s.rootVersionsGone(ctx, r, rr); !gone {
			add(shredd.CondReadPathConverged, false, "", why)
		} else {
			add(shredd.CondReadPathConverged, true, convergedWhy+", "+why+" and "+lookupWhy, "")
		}
	}

	// 4. Closure: every artifact of the lineage has a registered kind, no
	// holder reported holding artifacts shredd never registered, and every
	// write observed from a read of the lineage is in it, or declared
	// independent, or was refused.
	unregistered, breaks := facts.lineage.Unregistered, facts.breaks
	reads, outside := readsEvidence(facts.reads)
	switch {
	case outside != "":
		add(shredd.CondClosureIntact, false, "", outside)
	case unregistered > 0:
		add(shredd.CondClosureIntact, false, "", fmt.Sprintf("%d artifacts of the lineage have an unregistered kind", unregistered))
	case len(breaks) > 0:
		add(shredd.CondClosureIntact, false, "", "holders reported artifacts or kinds shredd never registered, so the lineage closure cannot be proven: "+strings.Join(breaks, ", "))
		out[len(out)-1].Status = "failed"
		out[len(out)-1].Holders = breaks // by holder, as closureBreaks orders them
	default:
		add(shredd.CondClosureIntact, true, "every artifact of the lineage has a registered kind, and no holder reported artifacts shredd never registered; "+reads, "")
	}

	// 5. Backups: the epoch that followed the re-key completed (or, with
	// per-subject keys, the subject's key is deleted in Vault).
	why := fmt.Sprintf("root epoch %d completed after the bucket re-key: backups taken before the forget can no longer open the subject's key", r.epoch.Int64)
	if s.keys.PerSubject() {
		why = "the subject's own Transit key is deleted: backups of the database hold only keys nothing can unwrap"
	}
	add(shredd.CondBackupsEpoch, r.shredded.Valid, why, "waiting for the root epoch that follows the subject's bucket re-key")
	return out, allOK, nil
}

// rootVersionsGone asks the root store's own report (not the database's
// record of the epoch) whether the root versions that wrapped the subject's bucket key
// before the forget's epoch are destroyed: its oldest available version
// must be the epoch's new one or later. With per-subject keys the subject's
// own key is asked for instead.
func (s *Eraser) rootVersionsGone(ctx context.Context, r forgetRow, rr *rootRead) (bool, string) {
	if s.keys.PerSubject() {
		return true, "the subject's own key is deleted"
	}
	if !r.epoch.Valid {
		return false, "no epoch is recorded for the forget"
	}
	e, err := s.shred.EpochByID(ctx, r.epoch.Int64)
	if err != nil {
		return false, "the forget's epoch could not be read"
	}
	// Judged from the root store asked now, not from this node's last read
	// of it: with many nodes the epoch may have run on another node, and
	// this node's last read may predate its trim. An unreachable root store
	// keeps the condition pending.
	v, err := rr.versions(ctx, s.shred)
	if err != nil {
		return false, "the root store did not answer: that the old root versions are gone cannot be confirmed now"
	}
	minAvail := v.MinAvailable
	if minAvail < e.ToVersion {
		return false, fmt.Sprintf("the root store still holds root version %d (the epoch destroys every version below %d)", minAvail, e.ToVersion)
	}
	return true, fmt.Sprintf("the root store reports every version below %d destroyed", e.ToVersion)
}

// lookupFails tries to get the forgotten subject's key through the normal
// path, the one every decrypt takes: it must fail as shredded.
func (s *Eraser) lookupFails(ctx context.Context, r forgetRow) (bool, string) {
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
func (s *Eraser) Verify(ctx context.Context, id shredd.ID) (shredd.Forget, error) {
	id, err := resolveAlias(ctx, s.db, id) // an alias: the kept forget
	if err != nil {
		return shredd.Forget{}, err
	}
	r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE id=?`, id[:]))
	if err != nil {
		return s.GetForget(ctx, id) // the same not-found and errors
	}
	if err := s.probeUpkeep(ctx); err != nil { // the probes verification asks
		return shredd.Forget{}, err
	}
	if err := s.verifyRow(ctx, r, nil); err != nil {
		return shredd.Forget{}, err
	}
	return s.GetForget(ctx, id)
}

func (s *Eraser) verifyRow(ctx context.Context, r forgetRow, rr *rootRead) error {
	if r.erased.Valid || r.state != shredd.StateShredded {
		return nil
	}
	conds, ok, err := s.verification(ctx, r, rr, nil)
	if err != nil || !ok {
		return err
	}
	// Read back, afresh, the facts the attestation asserts about the keys
	// (the tombstone, the bucket's re-wrap, the root store's trim) right
	// before signing: a disagreement stalls the forget with the reason.
	if rb := s.readBackKeys(ctx, r); rb != nil {
		if !errors.Is(rb, keystore.ErrReadBack) {
			return mapKeyErr(rb)
		}
		return s.stall(ctx, s.db, r.id, rb)
	}
	// The verification that proved the erasure is kept with it: the view and
	// the attestation of an erased forget show that evidence, not a later
	// recomputation (a later inventory of another holder must not unsay it).
	proof, err := json.Marshal(conds)
	if err != nil {
		return err
	}
	now := s.opts.Now().UnixNano()
	var att []byte // signed now, with the journal: logged and served byte for byte
	var commitment string
	if j := s.opts.Journal; j != nil {
		r.erased = sql.NullInt64{Int64: now, Valid: true}
		env, c, err := s.signAttestation(ctx, r, conds)
		if err != nil {
			return err
		}
		commitment = c
		if att, err = json.Marshal(env); err != nil {
			return fmt.Errorf("erasure: verify: %w", err)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("erasure: verify: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE forgets SET erased_at=?, proof=?, attestation=? WHERE id=? AND erased_at IS NULL`, now, proof, att, r.id[:])
	if err != nil {
		return fmt.Errorf("erasure: verify: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 && att != nil {
		if err := s.opts.Journal.AppendForget(ctx, tx, r.id, attest.Event{Event: attest.EventErasureAttested, Attested: &attest.AttestedEvent{
			Forget: r.id.String(), Subject: commitment, AttestationSHA256: attest.Digest(att)}}); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("erasure: verify: %w", err)
	}
	crashpoint.Hit("forget:erased") // erased, its attestation logged
	return nil
}

// readBackKeys reads back what a shredded forget asserts of the keys, the
// root store asked now (keystore.Shredder.CheckShredded).
func (s *Eraser) readBackKeys(ctx context.Context, r forgetRow) error {
	if s.keys.PerSubject() {
		return s.shred.CheckShredded(ctx, r.sid, shredd.Epoch{}, keystore.Versions{})
	}
	e, err := s.shred.EpochByID(ctx, r.epoch.Int64)
	if err != nil {
		return fmt.Errorf("erasure: verify: the forget's epoch: %w", err)
	}
	v, err := s.shred.RootVersions(ctx)
	if err != nil {
		return err
	}
	return s.shred.CheckShredded(ctx, r.sid, e, v)
}

// proofOf returns the verification stored when the forget was erased.
func (c *core) proofOf(ctx context.Context, id shredd.ID) ([]shredd.Condition, error) {
	var b []byte
	if err := c.db.QueryRowContext(ctx, `SELECT proof FROM forgets WHERE id=?`, id[:]).Scan(&b); err != nil {
		return nil, fmt.Errorf("erasure: proof: %w", err)
	}
	var conds []shredd.Condition
	if err := json.Unmarshal(b, &conds); err != nil {
		return nil, fmt.Errorf("erasure: proof: %w", err)
	}
	return conds, nil
}

// verifyAll verifies every shredded forget not yet erased.
func (s *Eraser) verifyAll(ctx context.Context) error {
	pending, err := s.queryForgets(ctx, ` WHERE state=? AND erased_at IS NULL`, shredd.StateShredded)
	if err != nil {
		return err
	}
	var rr rootRead // the root store asked once for the pass
	for _, r := range pending {
		if err := s.verifyRow(ctx, r, &rr); err != nil {
			return err
		}
	}
	return nil
}

// readsEvidence says what shredd observed of the reads of a lineage
// (registry.LineageReads): the leases, and how each write checked against
// them closed its read; outside is not empty when a write that named or
// inherited a read is not in the lineage, which the write's own check
// should have made impossible (its closure cannot be proven then).
func readsEvidence(r registry.LineageReads) (evidence, outside string) {
	n := r.Counts()
	var missing []string
	for _, w := range r.Writes {
		if (w.How == shredd.ReadNamed || w.How == shredd.ReadInherited) && !w.InLineage && len(missing) < 5 {
			missing = append(missing, fmt.Sprintf("artifact %s (lease %s)", w.Artifact, w.Lease))
		}
	}
	if len(missing) > 0 {
		outside = "writes that named or inherited a read of the lineage are not in its lineage: " + strings.Join(missing, ", ")
	}
	evidence = fmt.Sprintf("reads of the lineage observed: %d leases issued before the barrier; of the reads the writes of their readers answered for, "+
		"%d were named and %d inherited (those writes are in the lineage), %d declared independent, %d left undeclared by refused writes; "+
		"%d other artifacts were written by the same readers meanwhile in other units of work or under other holder names (separate by their writers' declaration)",
		r.Leases, n[shredd.ReadNamed], n[shredd.ReadInherited], n[shredd.ReadIndependent], n[shredd.ReadRefused], len(r.Separate))
	return evidence, outside
}
