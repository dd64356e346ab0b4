package registry

import (
	"context"
	"database/sql"

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

// LineageFacts is what a forget's verification reads of sid's lineage,
// settled or staged (lineage_all), in one statement (LineageFactsOf).
type LineageFacts struct {
	Total        int                    // the artifacts of the lineage
	Unregistered int                    // of them, those whose kind is not registered
	Held         map[string][]shredd.ID // the plaintext-held ones, by holder, in registration order
	Leases       []LiveLease            // leases issued before issuedBefore and live at now, by expiry
}

// LineageFactsOf reads sid's LineageFacts in one statement (one round
// trip, one snapshot): the leases issued before issuedBefore and live at
// now (Unix nanoseconds both).
func (s *Registry) LineageFactsOf(ctx context.Context, sid envelope.SID, issuedBefore, now int64) (LineageFacts, error) {
	if err := s.Fold(ctx); err != nil { // every acknowledged registration in the tables
		return LineageFacts{}, err
	}
	// One row per count, per held artifact and per live lease, told apart
	// by k; n orders each kind (registration order, expiry). The leases
	// take the lineage's artifacts first (IN), then theirs by index: a join
	// would let the planner scan every lease for the staged rows.
	// (PostgreSQL types a union's columns pair by pair from the left: the
	// branches with typed columns come first.)
	rows, err := s.db.QueryContext(ctx, `SELECT 'h' AS k, a.id AS id, a.holder AS holder, a.seq AS n
			FROM lineage_all l JOIN artifacts a ON a.id = l.artifact WHERE l.sid = ? AND NOT a.sealed
		UNION ALL SELECT 'l', le.id, le.holder, le.expires_at FROM leases le
			WHERE le.artifact IN (SELECT artifact FROM lineage_all WHERE sid = ?)
			AND le.issued_at < ? AND le.released_at IS NULL AND le.expires_at > ?
		UNION ALL SELECT 't', NULL, NULL, count(*) FROM lineage_all WHERE sid = ?
		UNION ALL SELECT 'u', NULL, NULL, count(*) FROM lineage_all l JOIN artifacts a ON a.id = l.artifact
			LEFT JOIN kinds k ON k.name = a.kind WHERE l.sid = ? AND k.name IS NULL
		ORDER BY k, n`, sid[:], sid[:], issuedBefore, now, sid[:], sid[:])
	if err != nil {
		return LineageFacts{}, err
	}
	defer rows.Close()
	f := LineageFacts{Held: map[string][]shredd.ID{}}
	for rows.Next() {
		var k string
		var idb []byte
		var holder sql.NullString
		var n int64
		if err := rows.Scan(&k, &idb, &holder, &n); err != nil {
			return LineageFacts{}, err
		}
		var id shredd.ID
		copy(id[:], idb)
		switch k {
		case "t":
			f.Total = int(n)
		case "u":
			f.Unregistered = int(n)
		case "h":
			f.Held[holder.String] = append(f.Held[holder.String], id)
		case "l":
			f.Leases = append(f.Leases, LiveLease{ID: id, Holder: holder.String, ExpiresAt: n})
		}
	}
	return f, rows.Err()
}
