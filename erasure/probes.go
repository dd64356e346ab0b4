package erasure

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
)

// Verification that asks (docs/api.md "Probes"). A holder that answers
// probes declares its compaction interval; once it has acked every
// artifact of a forget it held, shredd asks its retrieval path twice: at
// once, and again after the compaction interval plus a random part of it
// (so the holder cannot time a cache purge to the question). A probe that
// finds anything, or is not answered by its deadline, is asked again
// after a random short delay; the holder's artifacts are closed only when
// the latest probe, asked after the compaction interval, found nothing.

// Bounds of a holder's compaction interval.
const (
	MinProbeCompact = time.Second
	MaxProbeCompact = 30 * 24 * time.Hour
)

// ProbeDeadline is how long a holder has to answer a probe it can see.
var ProbeDeadline = 5 * time.Minute

// probeRetry bounds the random delay before a probe is asked again after
// one that found something or was not answered.
const probeRetry = time.Minute

// DeclareProbes records that holder answers probes with compaction
// interval compact (0 withdraws it).
func (s *Holders) DeclareProbes(ctx context.Context, holder string, compact time.Duration) error {
	if compact != 0 && (compact < MinProbeCompact || compact > MaxProbeCompact) {
		return fmt.Errorf("erasure: a compaction interval of %s, want %s to %s: %w", compact, MinProbeCompact, MaxProbeCompact, shredd.ErrInvalid)
	}
	if _, err := s.GetHolder(ctx, holder); err != nil {
		return err
	}
	var v any
	if compact > 0 {
		v = int64(compact)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE holders SET probe_compact=? WHERE id=?`, v, holder); err != nil {
		return fmt.Errorf("erasure: declare probes: %w", err)
	}
	s.wake()
	return nil
}

// probeRow is one probe as stored.
type probeRow struct {
	id                  shredd.ID
	forget              shredd.ID
	holder              string
	nonce               []byte
	artifacts, markers  []string
	acked, visible, due int64
	compact             int64 // the compaction interval the probe was asked with
	answered            sql.NullInt64
	found               sql.NullString
	signature           []byte
}

func (p probeRow) foundList() []string { return splitList(p.found.String) }

func splitList(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}

const probeCols = `SELECT id, forget, holder, nonce, artifacts, markers, acked_at, compact, visible_at, deadline, answered_at, found, signature FROM probes`

func (c *core) queryProbes(ctx context.Context, tail string, args ...any) ([]probeRow, error) {
	rows, err := c.db.QueryContext(ctx, probeCols+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("erasure: probes: %w", err)
	}
	defer rows.Close()
	var out []probeRow
	for rows.Next() {
		var p probeRow
		var id, forget []byte
		var arts, marks string
		if err := rows.Scan(&id, &forget, &p.holder, &p.nonce, &arts, &marks, &p.acked, &p.compact, &p.visible, &p.due, &p.answered, &p.found, &p.signature); err != nil {
			return nil, fmt.Errorf("erasure: probes: %w", err)
		}
		copy(p.id[:], id)
		copy(p.forget[:], forget)
		p.artifacts, p.markers = splitList(arts), splitList(marks)
		out = append(out, p)
	}
	return out, rows.Err()
}

// Probes lists the probes holder must answer now: visible, unanswered,
// before their deadline.
func (s *Holders) Probes(ctx context.Context, holder string) ([]shredd.Probe, error) {
	if _, err := s.GetHolder(ctx, holder); err != nil {
		return nil, err
	}
	now := s.opts.Now().UnixNano()
	ps, err := s.queryProbes(ctx, ` WHERE holder=? AND answered_at IS NULL AND visible_at<=? AND deadline>=? ORDER BY visible_at`, holder, now, now)
	if err != nil {
		return nil, err
	}
	out := make([]shredd.Probe, 0, len(ps))
	for _, p := range ps {
		q := shredd.Probe{ID: p.id, Forget: p.forget, Nonce: hex.EncodeToString(p.nonce), Markers: p.markers, Deadline: time.Unix(0, p.due).UTC()}
		for _, a := range p.artifacts {
			id, err := shredd.ParseID(a)
			if err != nil {
				return nil, fmt.Errorf("erasure: probes: %w", err)
			}
			q.Artifacts = append(q.Artifacts, id)
		}
		out = append(out, q)
	}
	return out, nil
}

// AnswerProbe records holder's signed answer to probe: found must be ids or
// markers it was asked about, the signature Ed25519 under its registered
// key over attest.ProbeMessage. A probe that found something is asked
// again after a random short delay (probeUpkeep).
func (s *Holders) AnswerProbe(ctx context.Context, holder string, probe shredd.ID, found []string, sig []byte) (shredd.ProbeResult, error) {
	h, err := s.GetHolder(ctx, holder)
	if err != nil {
		return shredd.ProbeResult{}, err
	}
	ps, err := s.queryProbes(ctx, ` WHERE id=? AND holder=?`, probe[:], holder)
	if err != nil {
		return shredd.ProbeResult{}, err
	}
	now := s.opts.Now().UnixNano()
	if len(ps) == 0 || ps[0].visible > now {
		return shredd.ProbeResult{}, fmt.Errorf("erasure: probe %s: %w", probe, shredd.ErrNotFound)
	}
	p := ps[0]
	if p.answered.Valid {
		return shredd.ProbeResult{}, fmt.Errorf("erasure: probe %s is already answered: %w", probe, shredd.ErrConflict)
	}
	if now > p.due {
		return shredd.ProbeResult{}, fmt.Errorf("erasure: probe %s passed its deadline; a new one will be asked: %w", probe, shredd.ErrConflict)
	}
	asked := map[string]bool{}
	for _, a := range append(slices.Clone(p.artifacts), p.markers...) {
		asked[a] = true
	}
	found = slices.Clone(found)
	slices.Sort(found)
	found = slices.Compact(found)
	for _, f := range found {
		if !asked[f] {
			return shredd.ProbeResult{}, fmt.Errorf("erasure: the answer names %q, which the probe did not ask about: %w", truncateID(f), shredd.ErrInvalid)
		}
	}
	msg := attest.ProbeMessage(p.id.String(), p.forget.String(), holder, hex.EncodeToString(p.nonce), p.artifacts, p.markers, found)
	if !ed25519.Verify(h.PublicKey, msg, sig) {
		return shredd.ProbeResult{}, fmt.Errorf("erasure: the probe answer's signature does not verify under holder %s's key: %w", holder, shredd.ErrSignature)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE probes SET answered_at=?, found=?, signature=? WHERE id=? AND answered_at IS NULL`,
		now, strings.Join(found, "\n"), sig, probe[:])
	if err != nil {
		return shredd.ProbeResult{}, fmt.Errorf("erasure: answer probe: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return shredd.ProbeResult{}, fmt.Errorf("erasure: probe %s is already answered: %w", probe, shredd.ErrConflict)
	}
	if len(found) > 0 {
		if err := s.probeUpkeep(ctx); err != nil { // ask again, at a random time
			return shredd.ProbeResult{}, err
		}
	}
	s.wake()
	return shredd.ProbeResult{Probe: probe, Clean: len(found) == 0}, nil
}

func truncateID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// randomBelow returns a random duration in [0, d) from r.
func randomBelow(r io.Reader, d time.Duration) (time.Duration, error) {
	if d <= 0 {
		return 0, nil
	}
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return time.Duration(binary.BigEndian.Uint64(b[:]) % uint64(d)), nil
}

// probeUpkeep asks the probes the open forgets need: for each holder that
// answers probes and has acked every artifact of a forget it held, the
// first two (now, and after its compaction interval and a random part of
// it), and a new one after a probe that found something or passed its
// deadline unanswered.
func (s *core) probeUpkeep(ctx context.Context) error {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	// Most services have no holder that answers probes: one read each.
	var any int
	switch err := s.db.QueryRowContext(ctx, `SELECT 1 FROM holders WHERE probe_compact IS NOT NULL UNION ALL SELECT 1 FROM probes LIMIT 1`).Scan(&any); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("erasure: probes: %w", err)
	}
	pairs, err := s.probePairs(ctx)
	if err != nil {
		return err
	}
	now := s.opts.Now()
	for _, p := range pairs {
		if err := s.planProbes(ctx, p, now); err != nil {
			return err
		}
	}
	return nil
}

// probePair is a forget and a holder whose probes upkeep plans.
type probePair struct {
	forget  shredd.ID
	holder  string
	compact time.Duration
	acked   int64
}

// probePairs reads the pairs upkeep plans: each open forget with a
// holder that acked it and answers probes now or was asked about it.
func (s *core) probePairs(ctx context.Context) ([]probePair, error) {
	// A holder declared now, or one already asked about the forget: once
	// asked, its probes gate the forget whatever it declares later (a
	// withdrawal does not wipe a probe that found something), with the
	// interval it declared then, or the shorter one it declares now.
	rows, err := s.db.QueryContext(ctx, `SELECT f.id, a.holder, h.probe_compact,
		(SELECT max(p.compact) FROM probes p WHERE p.forget=f.id AND p.holder=a.holder), max(ha.received_at) FROM forgets f
		JOIN acked a ON a.forget=f.id JOIN holders h ON h.id=a.holder JOIN holder_acks ha ON ha.id=a.ack
		WHERE f.state IN (?, ?) AND (h.probe_compact IS NOT NULL OR EXISTS (SELECT 1 FROM probes p WHERE p.forget=f.id AND p.holder=a.holder))
		GROUP BY f.id, a.holder, h.probe_compact`,
		shredd.StateCommitted, shredd.StateShredded)
	if err != nil {
		return nil, fmt.Errorf("erasure: probes: %w", err)
	}
	var pairs []probePair
	for rows.Next() {
		var p probePair
		var id []byte
		var declared, asked sql.NullInt64
		if err := rows.Scan(&id, &p.holder, &declared, &asked, &p.acked); err != nil {
			rows.Close()
			return nil, fmt.Errorf("erasure: probes: %w", err)
		}
		copy(p.forget[:], id)
		switch {
		case declared.Valid && asked.Valid:
			p.compact = time.Duration(min(declared.Int64, asked.Int64))
		case declared.Valid:
			p.compact = time.Duration(declared.Int64)
		default:
			p.compact = time.Duration(asked.Int64)
		}
		pairs = append(pairs, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: probes: %w", err)
	}
	return pairs, nil
}

// planProbes asks what pair p needs now (probeUpkeep).
func (s *core) planProbes(ctx context.Context, p probePair, now time.Time) error {
	r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE id=?`, p.forget[:]))
	if err != nil {
		return fmt.Errorf("erasure: probes: %w", err)
	}
	held, err := s.heldBy(ctx, r, p.holder)
	if err != nil {
		return err
	}
	acked, err := s.ackedSet(ctx, p.forget)
	if err != nil {
		return err
	}
	var asked []string
	for _, id := range held[p.holder] {
		if !acked[id] {
			asked = nil
			break
		}
		asked = append(asked, id.String())
	}
	if len(asked) == 0 {
		return nil // something still to ack: the ack comes first
	}
	slices.Sort(asked)
	ps, err := s.queryProbes(ctx, ` WHERE forget=? AND holder=? ORDER BY visible_at`, p.forget[:], p.holder)
	if err != nil {
		return err
	}
	var at []time.Time
	switch last := len(ps) - 1; {
	case last < 0:
		// The second probe after the compaction interval counted from
		// the ack, or from now when the holder declared probes after
		// its ack: never already due, never visible with the first.
		jitter, err := randomBelow(s.opts.Rand, p.compact/2+1)
		if err != nil {
			return err
		}
		at = []time.Time{now, later(time.Unix(0, p.acked), now).Add(p.compact + jitter)}
	case ps[last].visible > now.UnixNano() && ps[last].compact > int64(p.compact):
		// The holder shortened its interval: the coming probe moves
		// forward to the new one's schedule.
		jitter, err := randomBelow(s.opts.Rand, p.compact/2+1)
		if err != nil {
			return err
		}
		at := later(time.Unix(0, p.acked), now).Add(p.compact + jitter)
		if _, err := s.db.ExecContext(ctx, `UPDATE probes SET visible_at=?, deadline=?, compact=? WHERE id=? AND answered_at IS NULL AND visible_at>?`,
			at.UnixNano(), at.Add(ProbeDeadline).UnixNano(), int64(p.compact), ps[last].id[:], now.UnixNano()); err != nil {
			return fmt.Errorf("erasure: probes: %w", err)
		}
		return nil
	case ps[last].answered.Valid && ps[last].found.String == "" && ps[last].visible < p.acked+int64(p.compact):
		// Clean, but none after the compaction interval yet (the
		// interval was declared or changed after the first probes).
		jitter, err := randomBelow(s.opts.Rand, p.compact/2+1)
		if err != nil {
			return err
		}
		at = []time.Time{later(time.Unix(0, p.acked), now).Add(p.compact + jitter)}
	case ps[last].answered.Valid && ps[last].found.String != "",
		!ps[last].answered.Valid && now.UnixNano() > ps[last].due:
		jitter, err := randomBelow(s.opts.Rand, min(p.compact, probeRetry))
		if err != nil {
			return err
		}
		at = []time.Time{now.Add(jitter)}
	}
	for _, t := range at {
		if err := s.askProbe(ctx, p.forget, p.holder, asked, p.acked, p.compact, t); err != nil {
			return err
		}
	}
	return nil
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// askProbe stores a new probe of holder about forget's artifacts, visible
// from at, with a fresh id and nonce.
func (s *core) askProbe(ctx context.Context, forget shredd.ID, holder string, artifacts []string, acked int64, compact time.Duration, at time.Time) error {
	id, err := shredd.NewID(s.opts.Now(), s.opts.Rand)
	if err != nil {
		return fmt.Errorf("erasure: probe id: %w", err)
	}
	nonce := make([]byte, 32)
	if _, err := io.ReadFull(s.opts.Rand, nonce); err != nil {
		return fmt.Errorf("erasure: probe nonce: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO probes(id, forget, holder, nonce, artifacts, markers, acked_at, compact, visible_at, deadline) VALUES (?, ?, ?, ?, ?, '', ?, ?, ?, ?)`,
		id[:], forget[:], holder, nonce, strings.Join(artifacts, "\n"), acked, int64(compact), at.UnixNano(), at.Add(ProbeDeadline).UnixNano()); err != nil {
		return fmt.Errorf("erasure: ask probe: %w", err)
	}
	return nil
}

// probeFacts are the probes of the forgets being verified, by forget and
// holder, and the compaction interval of each holder that answers probes.
type probeFacts struct {
	probes  map[shredd.ID]map[string][]probeRow
	compact map[string]time.Duration
}

func (c *core) readProbeFacts(ctx context.Context, ids []shredd.ID) (probeFacts, error) {
	pf := probeFacts{probes: map[shredd.ID]map[string][]probeRow{}, compact: map[string]time.Duration{}}
	rows, err := c.db.QueryContext(ctx, `SELECT id, probe_compact FROM holders WHERE probe_compact IS NOT NULL`)
	if err != nil {
		return pf, fmt.Errorf("erasure: probes: %w", err)
	}
	for rows.Next() {
		var h string
		var d int64
		if err := rows.Scan(&h, &d); err != nil {
			rows.Close()
			return pf, fmt.Errorf("erasure: probes: %w", err)
		}
		pf.compact[h] = time.Duration(d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return pf, err
	}
	// Every verification pass reads this: no probe asked yet (most
	// services), no read per forget.
	var one int
	switch err := c.db.QueryRowContext(ctx, `SELECT 1 FROM probes LIMIT 1`).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return pf, nil
	case err != nil:
		return pf, fmt.Errorf("erasure: probes: %w", err)
	}
	for _, id := range ids {
		ps, err := c.queryProbes(ctx, ` WHERE forget=? ORDER BY visible_at`, id[:])
		if err != nil {
			return pf, err
		}
		for _, p := range ps {
			if pf.probes[id] == nil {
				pf.probes[id] = map[string][]probeRow{}
			}
			pf.probes[id][p.holder] = append(pf.probes[id][p.holder], p)
		}
	}
	return pf, nil
}

// gated reports whether holder's artifacts of a forget wait for probes:
// it answers probes now, or it was asked about this forget (its probes
// keep gating the forget whatever it declares later).
func (f verifyFacts) gated(holder string) bool {
	_, declared := f.compact[holder]
	return declared || len(f.probes[holder]) > 0
}

// probeState judges a holder that answers probes and acked every artifact
// of the forget it held: closed when its latest probe, asked after its
// compaction interval, found nothing; else why not.
func probeState(ps []probeRow, now int64) (bool, string) {
	if len(ps) == 0 {
		return false, "its retrieval path is to be probed"
	}
	last := ps[len(ps)-1]
	switch {
	case last.answered.Valid && last.found.String != "":
		return false, fmt.Sprintf("probe %s found %d of the artifacts it acked as purged: its retrieval path still returns them", last.id, len(last.foundList()))
	case last.answered.Valid && last.visible >= last.acked+last.compact:
		return true, ""
	case last.answered.Valid:
		return false, "a probe after its compaction interval is still to come"
	case now > last.due:
		return false, fmt.Sprintf("it did not answer probe %s by its deadline", last.id)
	}
	// A probe found something, then a later one is to come: say what was
	// found.
	for i := len(ps) - 2; i >= 0; i-- {
		if ps[i].answered.Valid && ps[i].found.String != "" {
			return false, fmt.Sprintf("probe %s found %d of the artifacts it acked as purged; asked again", ps[i].id, len(ps[i].foundList()))
		}
	}
	if now < last.visible {
		return false, fmt.Sprintf("its next probe comes within %s of its ack (its compaction interval and a random part of it)", time.Duration(last.compact+last.compact/2).Round(time.Second))
	}
	return false, "its probes are open (asked now and again after its compaction interval)"
}

// attestationProbes returns the probes that closed the holders' artifacts,
// for the attestation: per holder, the clean answers after its last probe
// that found something or went unanswered.
func (c *core) attestationProbes(ctx context.Context, forget shredd.ID) ([]attest.Probe, error) {
	ps, err := c.queryProbes(ctx, ` WHERE forget=? ORDER BY holder, visible_at`, forget[:])
	if err != nil {
		return nil, err
	}
	var out, keep []attest.Probe // keep: the current holder's clean answers since its last other one
	for i, p := range ps {
		if i > 0 && p.holder != ps[i-1].holder {
			out, keep = append(out, keep...), nil
		}
		if !p.answered.Valid || p.found.String != "" {
			keep = nil // only what came after
			continue
		}
		keep = append(keep, attest.Probe{Holder: p.holder, Probe: p.id.String(), Nonce: hex.EncodeToString(p.nonce),
			AskedAt: time.Unix(0, p.visible).UTC(), AnsweredAt: time.Unix(0, p.answered.Int64).UTC(),
			Artifacts: p.artifacts, Markers: nonEmpty(p.markers), Found: []string{}, Signature: p.signature})
	}
	return append(out, keep...), nil
}

func nonEmpty(xs []string) []string {
	if len(xs) == 0 {
		return nil
	}
	return xs
}
