package registry

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/derivation"
	"github.com/shredd/shredd/envelope"
)

// The reads of a forget's cascade, verification and proof (package
// erasure): the artifacts of a subject's lineage, their children, holders
// and leases. The lineage by subject is read either settled only (the
// caller called Settle first) or settled and staged (derivation.LineageAll),
// as each method says. The graph's tables are package derivation's: the
// statements here join them with the artifacts, kinds and leases in one
// snapshot under the names derivation gives.

// LastSeqSQL is the registration order of the newest artifact, 0 for none:
// the barrier a forget's commit records in its one statement (package
// erasure), the one SQL fragment the registry gives another package.
const LastSeqSQL = `(SELECT coalesce(max(seq), 0) FROM artifacts)`

// lineageArtifactsSQL is the settled lineage rows l joined with their
// artifacts a: "FROM " + lineageArtifactsSQL + " WHERE l.sid = ?".
const lineageArtifactsSQL = derivation.Lineage + ` l JOIN artifacts a ON a.id = l.artifact`

// Dependent is an artifact of a subject's lineage (SubjectArtifacts).
type Dependent struct {
	ID     shredd.ID
	Seq    int64 // registration order
	Kind   string
	Holder string
	Sealed bool
	Direct bool // the subject is the artifact's own, not a parent's
	Others int  // the other subjects of its lineage
}

// SubjectArtifacts lists the settled artifacts of sid's lineage (call
// Settle first), in no particular order: of the subject's current life
// (lifeFloor), which a forget of it reaches.
func (s *Registry) SubjectArtifacts(ctx context.Context, sid envelope.SID) ([]Dependent, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	floor, err := s.lifeFloor(ctx, sid)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT a.id, a.seq, a.kind, a.holder, a.sealed, l.direct,
			`+derivation.OthersSQL+`
		FROM `+lineageArtifactsSQL+` WHERE l.sid = ? AND l.gen >= ?`, sid[:], floor)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Dependent
	for rows.Next() {
		var a Dependent
		var id []byte
		if err := rows.Scan(&id, &a.Seq, &a.Kind, &a.Holder, &a.Sealed, &a.Direct, &a.Others); err != nil {
			return nil, err
		}
		copy(a.ID[:], id)
		out = append(out, a)
	}
	return out, rows.Err()
}

// Children lists the settled artifacts that have parent among their
// parents (call Settle first): derivation.Graph.Children.
func (s *Registry) Children(ctx context.Context, parent shredd.ID) ([]shredd.ID, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	return s.graph.Children(ctx, parent)
}

// HeldBy returns the plaintext-held artifacts of sid's lineage, settled or
// staged (lineage_all), of its current life (lifeFloor), held by holder
// ("" for every holder), by holder, in registration order.
func (s *Registry) HeldBy(ctx context.Context, sid envelope.SID, holder string) (map[string][]shredd.ID, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	floor, err := s.lifeFloor(ctx, sid)
	if err != nil {
		return nil, err
	}
	q := `SELECT a.id, a.holder FROM ` + derivation.LineageAll + ` l JOIN artifacts a ON a.id = l.artifact WHERE l.sid = ? AND l.gen >= ? AND NOT a.sealed`
	args := []any{sid[:], floor}
	if holder != "" {
		q += ` AND a.holder = ?`
		args = append(args, holder)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY a.seq`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]shredd.ID{}
	for rows.Next() {
		var b []byte
		var h string
		if err := rows.Scan(&b, &h); err != nil {
			return nil, err
		}
		var id shredd.ID
		copy(id[:], b)
		out[h] = append(out[h], id)
	}
	return out, rows.Err()
}

// lifeFloor is the first key generation of sid's current life
// (Liveness.LifeFloors): 0 for a subject never reinstated.
func (s *Registry) lifeFloor(ctx context.Context, sid envelope.SID) (uint32, error) {
	f, err := s.live.LifeFloors(ctx, s.db, []envelope.SID{sid})
	if err != nil {
		return 0, err
	}
	return f[sid], nil
}

// maxSubjectQuery bounds the subjects of one statement of Unregistered
// and HeldIn.
const maxSubjectQuery = 256

// eachSubjectRow runs the statement query(in) for sids, at most
// maxSubjectQuery at a time and each once, with in the placeholders of
// their IN list, their arguments then extra, and calls scan for each row.
func (s *Registry) eachSubjectRow(ctx context.Context, sids []envelope.SID, query func(in string) string, extra []any,
	scan func(sc interface{ Scan(...any) error }) error) error {
	seen := make(map[envelope.SID]bool, len(sids))
	var args []any
	for i, sid := range sids {
		if !seen[sid] {
			seen[sid] = true
			args = append(args, sid[:])
		}
		if len(args) < maxSubjectQuery && (i < len(sids)-1 || len(args) == 0) {
			continue
		}
		rows, err := s.db.QueryContext(ctx, query(strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")), append(args, extra...)...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := scan(rows); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		args = nil
	}
	return nil
}

// Unregistered returns which of the subjects sids have in their settled
// lineage (call Settle first) an artifact whose kind is not registered: a
// forget of theirs has its closure pending, not failed, when a holder's
// inventory breaks it.
func (s *Registry) Unregistered(ctx context.Context, sids []envelope.SID) (map[envelope.SID]bool, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	floors, err := s.live.LifeFloors(ctx, s.db, sids)
	if err != nil {
		return nil, fmt.Errorf("registry: unregistered kinds: %w", err)
	}
	out := map[envelope.SID]bool{}
	err = s.eachSubjectRow(ctx, sids, func(in string) string {
		return `SELECT DISTINCT l.sid, l.gen FROM ` + derivation.Lineage + ` l JOIN artifacts a ON a.id = l.artifact
			LEFT JOIN kinds k ON k.name = a.kind WHERE l.sid IN (` + in + `) AND k.name IS NULL`
	}, nil, func(sc interface{ Scan(...any) error }) error {
		var b []byte
		var gen int64
		if err := sc.Scan(&b, &gen); err != nil {
			return err
		}
		var sid envelope.SID
		copy(sid[:], b)
		if gen >= int64(floors[sid]) {
			out[sid] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("registry: unregistered kinds: %w", err)
	}
	return out, nil
}

// Held is a plaintext-held artifact of a subject's lineage (HeldIn).
type Held struct {
	SID    envelope.SID
	ID     shredd.ID
	Holder string
}

// HeldIn lists the plaintext-held artifacts of the settled lineages of
// sids (call Settle first) whose holders are from first to last, in no
// particular order: the holders' pending purge work, for a page of them.
func (s *Registry) HeldIn(ctx context.Context, sids []envelope.SID, first, last string) ([]Held, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	floors, err := s.live.LifeFloors(ctx, s.db, sids)
	if err != nil {
		return nil, fmt.Errorf("registry: held: %w", err)
	}
	var out []Held
	err = s.eachSubjectRow(ctx, sids, func(in string) string {
		return `SELECT l.sid, l.gen, a.id, a.holder FROM ` + derivation.Lineage + ` l JOIN artifacts a ON a.id = l.artifact
			WHERE l.sid IN (` + in + `) AND NOT a.sealed AND a.holder >= ? AND a.holder <= ?`
	}, []any{first, last}, func(sc interface{ Scan(...any) error }) error {
		var sid, id []byte
		var gen int64
		var h Held
		if err := sc.Scan(&sid, &gen, &id, &h.Holder); err != nil {
			return err
		}
		copy(h.SID[:], sid)
		copy(h.ID[:], id)
		if gen >= int64(floors[h.SID]) {
			out = append(out, h)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("registry: held: %w", err)
	}
	return out, nil
}

// LiveLease is a lease not released nor expired (LineageFacts).
type LiveLease struct {
	ID        shredd.ID
	Holder    string
	ExpiresAt int64 // Unix nanoseconds
}

// LineageFacts is what a forget's verification reads of a subject's
// lineage, settled or staged (lineage_all): LineageFactsOf.
type LineageFacts struct {
	Total        int                    // the artifacts of the lineage
	Unregistered int                    // of them, those whose kind is not registered
	Held         map[string][]shredd.ID // the plaintext-held ones, by holder, in registration order
	Leases       []LiveLease            // leases issued before the subject's time and live at now, by expiry
}

// LineageFactsOf reads the LineageFacts of subjects sids in one statement
// (one round trip, one snapshot), in the order of sids: the leases of
// sids[i] issued before issuedBefore[i] and live at now (Unix nanoseconds
// all). The forgets of a group commit are answered with one call.
func (s *Registry) LineageFactsOf(ctx context.Context, sids []envelope.SID, issuedBefore []int64, now int64) ([]LineageFacts, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	in := `(` + strings.TrimSuffix(strings.Repeat("?, ", len(sids)), ", ") + `)`
	args := make([]any, 0, 1+len(sids))
	args = append(args, now)
	for _, sid := range sids {
		args = append(args, sid[:])
	}
	// One row per lineage row and live lease on its artifact (one row
	// without a lease if none), in one pass over the lineage: the
	// artifact (none if unknown: counted, neither held nor unregistered),
	// its flags (1 held: not sealed; 2 of an unregistered kind) and
	// registration order, and the lease.
	// The artifact's columns come from the index artifacts_facts alone
	// (one lookup a row, not two); SQLite's planner takes the unique index
	// on id unless told.
	facts := "artifacts a"
	if !s.db.Shared() {
		facts = "artifacts a INDEXED BY artifacts_facts"
	}
	floors, err := s.live.LifeFloors(ctx, s.db, sids)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT l.sid, l.gen, l.artifact, a.holder, a.seq,
			(CASE WHEN a.id IS NOT NULL AND NOT a.sealed THEN 1 ELSE 0 END) + (CASE WHEN a.id IS NOT NULL AND k.name IS NULL THEN 2 ELSE 0 END),
			le.id, le.holder, le.expires_at, le.issued_at
		FROM `+derivation.LineageAll+` l LEFT JOIN `+facts+` ON a.id = l.artifact LEFT JOIN kinds k ON k.name = a.kind
			LEFT JOIN leases le ON le.artifact = l.artifact AND le.released_at IS NULL AND le.expires_at > ?
		WHERE l.sid IN `+in, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type held struct {
		id  shredd.ID
		seq int64
	}
	type fact struct {
		LineageFacts
		held   map[string][]held
		issued []int64 // of Leases
	}
	by := make(map[envelope.SID]*fact, len(sids))
	for _, sid := range sids {
		by[sid] = &fact{held: map[string][]held{}}
	}
	type pair struct {
		sid envelope.SID
		id  shredd.ID
	}
	artifacts := map[pair]bool{} // a lineage row is one row per lease on its artifact
	leases := map[pair]bool{}    // a lease is one row per lineage row of its artifact (settled, staged)
	for rows.Next() {
		var sidb, artb, leaseb []byte
		var holder, leaseHolder sql.NullString
		var seq, expires, issued sql.NullInt64
		var flags int64
		var gen int64
		if err := rows.Scan(&sidb, &gen, &artb, &holder, &seq, &flags, &leaseb, &leaseHolder, &expires, &issued); err != nil {
			return nil, err
		}
		var p pair
		copy(p.sid[:], sidb)
		copy(p.id[:], artb)
		f := by[p.sid]
		if f == nil || gen < int64(floors[p.sid]) { // an earlier life's: erased by the forgets before
			continue
		}
		if !artifacts[p] {
			artifacts[p] = true
			f.Total++
			if flags&1 != 0 {
				f.held[holder.String] = append(f.held[holder.String], held{p.id, seq.Int64})
			}
			if flags&2 != 0 {
				f.Unregistered++
			}
		}
		if leaseb == nil {
			continue
		}
		var l pair
		l.sid = p.sid
		copy(l.id[:], leaseb)
		if !leases[l] {
			leases[l] = true
			f.Leases = append(f.Leases, LiveLease{ID: l.id, Holder: leaseHolder.String, ExpiresAt: expires.Int64})
			f.issued = append(f.issued, issued.Int64)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]LineageFacts, len(sids))
	for i, sid := range sids {
		f := by[sid]
		out[i] = LineageFacts{Total: f.Total, Unregistered: f.Unregistered, Held: make(map[string][]shredd.ID, len(f.held))}
		for h, hs := range f.held {
			slices.SortFunc(hs, func(a, b held) int { return cmp.Compare(a.seq, b.seq) })
			ids := make([]shredd.ID, len(hs))
			for j, x := range hs {
				ids[j] = x.id
			}
			out[i].Held[h] = ids
		}
		for j, l := range f.Leases {
			if f.issued[j] < issuedBefore[i] {
				out[i].Leases = append(out[i].Leases, l)
			}
		}
		slices.SortStableFunc(out[i].Leases, func(a, b LiveLease) int { return cmp.Compare(a.ExpiresAt, b.ExpiresAt) })
	}
	return out, nil
}
