package registry

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"strings"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
)

// The reads of a forget's cascade, verification and proof (package
// erasure): the artifacts of a subject's lineage, their children, holders
// and leases. The lineage by subject is read either settled only (the
// caller called Settle first) or settled and staged (lineage_all), as each
// method says.

// SQL fragments, for statements of other packages that join the registry's
// tables with their own in one statement (one snapshot). They name the
// artifact a, its lineage row l and, in OthersSQL, another lineage row o.
const (
	// LastSeqSQL is the registration order of the newest artifact, 0 for
	// none: the barrier a forget's commit records.
	LastSeqSQL = `(SELECT coalesce(max(seq), 0) FROM artifacts)`
	// LineageArtifactsSQL is the settled lineage rows l joined with their
	// artifacts a: "FROM " + LineageArtifactsSQL + " WHERE l.sid = ?".
	LineageArtifactsSQL = `lineage l JOIN artifacts a ON a.id = l.artifact`
	// OthersSQL is the number of other subjects in the lineage of the
	// artifact of lineage row l: above 0, a collateral aggregate.
	OthersSQL = `(SELECT count(*) - 1 FROM lineage o WHERE o.artifact = l.artifact)`
)

// JoinLineageSQL joins the settled lineage rows l of the subject sid (an
// SQL expression of the caller's statement) and their artifacts a.
func JoinLineageSQL(sid string) string {
	return `JOIN lineage l ON l.sid = ` + sid + ` JOIN artifacts a ON a.id = l.artifact`
}

// UnregisteredKindSQL selects 1 for each settled artifact of the lineage
// of subject sid (an SQL expression of the caller's statement) whose kind
// is not registered: for a NOT EXISTS.
func UnregisteredKindSQL(sid string) string {
	return `SELECT 1 FROM lineage l JOIN artifacts a ON a.id = l.artifact
		LEFT JOIN kinds k ON k.name = a.kind WHERE l.sid = ` + sid + ` AND k.name IS NULL`
}

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
// Settle first), in no particular order.
func (s *Registry) SubjectArtifacts(ctx context.Context, sid envelope.SID) ([]Dependent, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT a.id, a.seq, a.kind, a.holder, a.sealed, l.direct,
			`+OthersSQL+`
		FROM `+LineageArtifactsSQL+` WHERE l.sid = ?`, sid[:])
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
// parents (call Settle first).
func (s *Registry) Children(ctx context.Context, parent shredd.ID) ([]shredd.ID, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT artifact FROM artifact_parents WHERE parent = ?`, parent[:])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []shredd.ID
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var child shredd.ID
		copy(child[:], b)
		out = append(out, child)
	}
	return out, rows.Err()
}

// HeldBy returns the plaintext-held artifacts of sid's lineage, settled or
// staged (lineage_all), held by holder ("" for every holder), by holder, in
// registration order.
func (s *Registry) HeldBy(ctx context.Context, sid envelope.SID, holder string) (map[string][]shredd.ID, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return nil, err
	}
	q := `SELECT a.id, a.holder FROM lineage_all l JOIN artifacts a ON a.id = l.artifact WHERE l.sid = ? AND NOT a.sealed`
	args := []any{sid[:]}
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
	list := make([]any, len(sids))
	for i, sid := range sids {
		list[i] = sid[:]
	}
	// The held, the leases' (twice, then now), the total's, the kinds'.
	args := slices.Concat(list, list, list, []any{now}, list, list)
	// One row per count, per held artifact and per live lease, with its
	// subject, told apart by k; n orders each kind (registration order,
	// expiry). The leases take the lineage's artifacts first (IN), then
	// theirs by index, then their subjects among sids: a lease on an
	// artifact of several of them is one row each (and one per lineage
	// row: settled and staged, told apart below). (PostgreSQL types a
	// union's columns pair by pair from the left: the branches with typed
	// columns come first.)
	rows, err := s.db.QueryContext(ctx, `SELECT 'h' AS k, l.sid AS sid, a.id AS id, a.holder AS holder, a.seq AS n, 0 AS issued
			FROM lineage_all l JOIN artifacts a ON a.id = l.artifact WHERE l.sid IN `+in+` AND NOT a.sealed
		UNION ALL SELECT 'l', x.sid, le.id, le.holder, le.expires_at, le.issued_at FROM leases le JOIN lineage_all x ON x.artifact = le.artifact
			WHERE x.sid IN `+in+` AND le.artifact IN (SELECT artifact FROM lineage_all WHERE sid IN `+in+`)
			AND le.released_at IS NULL AND le.expires_at > ?
		UNION ALL SELECT 't', sid, NULL, NULL, count(*), 0 FROM lineage_all WHERE sid IN `+in+` GROUP BY sid
		UNION ALL SELECT 'u', l.sid, NULL, NULL, count(*), 0 FROM lineage_all l JOIN artifacts a ON a.id = l.artifact
			LEFT JOIN kinds k ON k.name = a.kind WHERE l.sid IN `+in+` AND k.name IS NULL GROUP BY l.sid
		ORDER BY 1, 5`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	by := make(map[envelope.SID]*LineageFacts, len(sids))
	for _, sid := range sids {
		by[sid] = &LineageFacts{Held: map[string][]shredd.ID{}}
	}
	type leaseOf struct {
		sid    envelope.SID
		issued int64
		l      LiveLease
	}
	seen := map[[2]any]bool{}
	var leases []leaseOf
	for rows.Next() {
		var k string
		var sidb, idb []byte
		var holder sql.NullString
		var n, issued int64
		if err := rows.Scan(&k, &sidb, &idb, &holder, &n, &issued); err != nil {
			return nil, err
		}
		var sid envelope.SID
		copy(sid[:], sidb)
		var id shredd.ID
		copy(id[:], idb)
		f := by[sid]
		if f == nil {
			continue
		}
		switch k {
		case "t":
			f.Total += int(n) // a count per engine's grouping: one row per subject
		case "u":
			f.Unregistered += int(n)
		case "h":
			f.Held[holder.String] = append(f.Held[holder.String], id)
		case "l":
			if key := [2]any{sid, id}; !seen[key] {
				seen[key] = true
				leases = append(leases, leaseOf{sid, issued, LiveLease{ID: id, Holder: holder.String, ExpiresAt: n}})
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]LineageFacts, len(sids))
	for i, sid := range sids {
		out[i] = *by[sid]
		out[i].Held = maps.Clone(out[i].Held)
		for _, l := range leases {
			if l.sid == sid && l.issued < issuedBefore[i] {
				out[i].Leases = append(out[i].Leases, l.l)
			}
		}
	}
	return out, nil
}
