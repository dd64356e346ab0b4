package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
)

// MaxExtensions bounds the lease TTLs a lease's attribution is extended
// by refused writes (RecordRefused), beyond its first.
const MaxExtensions = 2

// DefaultLeaseTTL is how long a decrypt's lease lasts unless released.
const DefaultLeaseTTL = 5 * time.Minute

// leaseReq is one lease waiting for the group commit.
type leaseReq struct {
	l    shredd.Lease
	refs []envelope.Ref // the lineage, checked live in the commit where nodes share the database
	err  error          // this request's own refusal
	done chan error
}

// maxLeaseGroup bounds the leases of one group commit.
const maxLeaseGroup = 512

// leaseWriter commits leases in groups: every decrypt needs its lease durable
// before the plaintext leaves, and one transaction (one fsync) per decrypt
// would bound decrypts by the disk. Requests that arrive while a commit runs
// share the next one.
func (s *Registry) leaseWriter() {
	last := 1 // the last group's size (collect)
	for first := range s.leaseQ {
		batch := collect(s.leaseQ, first, maxLeaseGroup, last)
		last = len(batch)
		err := s.writeLeases(batch)
		for _, r := range batch {
			if err == nil {
				r.done <- r.err
			} else {
				r.done <- err
			}
		}
		s.kickFlush()
	}
}

func (s *Registry) writeLeases(batch []leaseReq) error {
	ctx, cancel := s.db.Bound(context.Background())
	defer cancel()
	refs := distinctRefs(len(batch), func(i int) []envelope.Ref { return batch[i].refs })
	// The lineages' shards (touching): leases of other nodes commit
	// beside this group; a forget waits for it or it for the forget.
	tx, err := s.db.BeginTouching(ctx, s.touching(refs))
	if err != nil {
		return fmt.Errorf("registry: lease: %w", err)
	}
	defer tx.Rollback()
	// Where nodes share the database, a forget committed on another node
	// holds no barrier lock here: the lineages are checked live in the
	// leases' own transaction (a query per hundred subjects), which the
	// write lock (shared here, alone in the forget) orders against the
	// forget's commit (either the forget sees the lease, or the lease sees
	// the tombstone). One node's barrier locks order it.
	var notLive map[envelope.Ref]error
	if s.db.Shared() {
		if notLive, err = s.live.CheckLiveMany(ctx, tx, refs); err != nil {
			return fmt.Errorf("registry: lease: %w", err)
		}
	}
	granted := make([]*shredd.Lease, 0, len(batch))
	for i := range batch {
		r := &batch[i]
		for _, ref := range r.refs {
			if err := notLive[ref]; err != nil {
				r.err = MapKeyErr(err)
				break
			}
		}
		if r.err == nil {
			granted = append(granted, &r.l)
		}
	}
	if err := insertLeases(ctx, s.db, tx, granted); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("registry: lease: %w", err)
	}
	if !s.db.Shared() {
		s.reads.add(granted, s.opts.Now().UnixNano()) // before any of them is answered
	}
	return nil
}

// insertLeases writes the rows of leases in tx: on a shared database one
// statement for the group (one round trip, as insertStagedShared), on
// SQLite one prepared single-row statement per lease.
func insertLeases(ctx context.Context, db *storage.DB, tx *storage.Tx, leases []*shredd.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	if db.Shared() {
		ids, arts := make([][]byte, len(leases)), make([][]byte, len(leases))
		holders, issued, expires := make([]string, len(leases)), make([]int64, len(leases)), make([]int64, len(leases))
		readers, units := make([]*string, len(leases)), make([]string, len(leases))
		for i, l := range leases {
			ids[i], arts[i], holders[i], issued[i], expires[i] = l.ID[:], l.Artifact[:], l.Holder, l.IssuedAt.UnixNano(), l.ExpiresAt.UnixNano()
			readers[i], units[i] = nil, l.Unit
			if l.Reader != "" {
				readers[i] = &l.Reader
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO leases(id, artifact, holder, issued_at, expires_at, reader, unit)
			SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[])`,
			ids, arts, holders, issued, expires, readers, units); err != nil {
			return fmt.Errorf("registry: lease: %w", err)
		}
		return nil
	}
	for _, l := range leases {
		if _, err := tx.ExecContext(ctx, `INSERT INTO leases(id, artifact, holder, issued_at, expires_at, reader, unit) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			l.ID[:], l.Artifact[:], l.Holder, l.IssuedAt.UnixNano(), l.ExpiresAt.UnixNano(), nullString(l.Reader), l.Unit); err != nil {
			return fmt.Errorf("registry: lease: %w", err)
		}
	}
	return nil
}

// IssueLease records a lease of artifact for who durably (group commit)
// and returns it. refs is the artifact's lineage: where nodes share the
// database it is checked live in the lease's own transaction. The caller
// holds the barrier read locks of the lineage.
func (s *Registry) IssueLease(ctx context.Context, artifact shredd.ID, who shredd.Reader, refs []envelope.Ref) (shredd.Lease, error) {
	id, err := s.newID()
	if err != nil {
		return shredd.Lease{}, err
	}
	now := s.opts.Now()
	l := shredd.Lease{ID: id, Artifact: artifact, Holder: who.Holder, Reader: who.Token, Unit: who.Unit, IssuedAt: now, ExpiresAt: now.Add(s.opts.LeaseTTL)}
	r := leaseReq{l: l, refs: refs, done: make(chan error, 1)}
	// Within the store timeout, the wait for the group commit included
	// (await). A lease written after its decrypt gave up hands out no
	// plaintext: it only makes a forget wait for it, as for any lease.
	ctx, cancel := s.db.Bound(ctx)
	defer cancel()
	if err := enqueue(ctx, s, s.leaseQ, r); err != nil {
		return shredd.Lease{}, fmt.Errorf("registry: lease: %w", err)
	}
	if err := await(ctx, r.done); err != nil {
		return shredd.Lease{}, err
	}
	return l, nil
}

func scanLease(sc interface{ Scan(...any) error }) (shredd.Lease, error) {
	var l shredd.Lease
	var id, art []byte
	var issued, expires int64
	var released sql.NullInt64
	var reader sql.NullString
	if err := sc.Scan(&id, &art, &l.Holder, &issued, &expires, &released, &reader, &l.Unit); err != nil {
		return shredd.Lease{}, err
	}
	l.Reader = reader.String
	copy(l.ID[:], id)
	copy(l.Artifact[:], art)
	l.IssuedAt, l.ExpiresAt = time.Unix(0, issued).UTC(), time.Unix(0, expires).UTC()
	l.ReleasedAt = Time(released)
	return l, nil
}

const leaseCols = `SELECT id, artifact, holder, issued_at, expires_at, released_at, reader, unit FROM leases`

// nullString is s, or NULL when empty.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// ReadsOf returns the leases attributable to a writer at now: issued to
// its reader before before (zero: any time; a lease issued after a
// write's content was complete cannot have fed it), not expired (released
// or not: a release says the holder dropped the plaintext, not that
// nothing was derived from it meanwhile), whose holder and unit match the
// writer's (equal, or either empty). At most limit leases, by expiry.
// Where one process owns the database (SQLite), it answers from the live
// leases it keeps in memory (liveReads); on a shared database, each pair of
// a unit and a holder the writer matches is one query over a range of the
// index leases_by_reader (one statement of their union costs ten times
// more), so the reads of the reader's other units and holders are not
// visited.
func (s *Registry) ReadsOf(ctx context.Context, who shredd.Reader, before time.Time, limit int) ([]shredd.Lease, error) {
	now := s.opts.Now().UnixNano()
	until := int64(1<<63 - 1)
	if !before.IsZero() {
		until = before.UnixNano()
	}
	if !s.db.Shared() {
		return s.reads.of(who, now, until, limit), nil
	}
	var out []shredd.Lease
	for _, u := range matching(who.Unit) {
		for _, h := range matching(who.Holder) {
			q := leaseCols + ` WHERE reader = ? AND expires_at > ? AND issued_at < ?`
			args := []any{who.Token, now, until}
			if u != nil {
				q += ` AND unit = ?`
				args = append(args, *u)
			}
			if h != nil {
				q += ` AND holder = ?`
				args = append(args, *h)
			}
			ls, err := queryLeases(ctx, s.db, q+` ORDER BY expires_at LIMIT ?`, append(args, limit)...)
			if err != nil {
				return nil, fmt.Errorf("registry: reads: %w", err)
			}
			out = append(out, ls...)
		}
	}
	return byExpiry(out, limit), nil
}

// byExpiry sorts leases by expiry and keeps the first limit.
func byExpiry(out []shredd.Lease, limit int) []shredd.Lease {
	slices.SortFunc(out, func(a, b shredd.Lease) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	return out[:min(len(out), limit)]
}

// queryLeases runs a query of leaseCols on db.
func queryLeases(ctx context.Context, db *storage.DB, q string, args ...any) ([]shredd.Lease, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []shredd.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// liveReads is, where one process owns the database, every live lease
// issued to a reader, by reader, then unit and holder: a write's check
// needs no query (a query per pair of unit and holder costs an encrypt
// more than its own work), and a write that names its unit and holder
// looks up at most four lists. Each reader's lists have a lock of their
// own, so a reader with many reads does not hold up the writes of
// others. Filled at Open from the database's live leases and by every
// group of leases committed (before any is answered); expired leases are
// dropped as the lists are read and by a sweep every sweepEvery leases,
// so it holds about the leases of one lease TTL.
type liveReads struct {
	mu    sync.Mutex
	by    map[string]*readerReads
	added int // leases since the last sweep
}

// readerReads is the live leases of one reader, each list by expiry.
type readerReads struct {
	mu sync.Mutex
	by map[unitHolder][]shredd.Lease
}

type unitHolder struct{ unit, holder string }

const sweepEvery = 4096

// reader returns the lists of token, made when create is set (else nil for
// a reader with none).
func (r *liveReads) reader(token string, create bool) *readerReads {
	r.mu.Lock()
	defer r.mu.Unlock()
	rr := r.by[token]
	if rr == nil && create {
		if r.by == nil {
			r.by = map[string]*readerReads{}
		}
		rr = &readerReads{by: map[unitHolder][]shredd.Lease{}}
		r.by[token] = rr
	}
	return rr
}

// extend replaces leases whose expiry grew (RecordRefused) with their new
// records.
func (r *liveReads) extend(leases []*shredd.Lease, now int64) {
	for _, l := range leases {
		if rr := r.reader(l.Reader, false); rr != nil {
			rr.mu.Lock()
			k := unitHolder{l.Unit, l.Holder}
			rr.by[k] = slices.DeleteFunc(rr.by[k], func(o shredd.Lease) bool { return o.ID == l.ID })
			rr.mu.Unlock()
		}
	}
	r.add(leases, now)
}

// add records leases committed (and extended ones, from extend).
func (r *liveReads) add(leases []*shredd.Lease, now int64) {
	for _, l := range leases {
		if l.Reader == "" {
			continue
		}
		rr := r.reader(l.Reader, true)
		rr.mu.Lock()
		k := unitHolder{l.Unit, l.Holder}
		ls := append(rr.by[k], *l)
		// A group's leases follow the earlier ones in expiry (one TTL); an
		// extended one moves to its place.
		for i := len(ls) - 1; i > 0 && ls[i].ExpiresAt.Before(ls[i-1].ExpiresAt); i-- {
			ls[i], ls[i-1] = ls[i-1], ls[i]
		}
		rr.by[k] = ls
		rr.mu.Unlock()
	}
	r.mu.Lock()
	r.added += len(leases)
	sweep := r.added >= sweepEvery
	var all []*readerReads
	if sweep {
		r.added = 0
		for _, rr := range r.by {
			all = append(all, rr)
		}
	}
	r.mu.Unlock()
	for _, rr := range all {
		rr.mu.Lock()
		for k := range rr.by {
			rr.prune(k, now)
		}
		rr.mu.Unlock()
	}
}

// prune drops the expired leases of list k (at its front).
func (rr *readerReads) prune(k unitHolder, now int64) []shredd.Lease {
	ls := rr.by[k]
	i := 0
	for i < len(ls) && ls[i].ExpiresAt.UnixNano() <= now {
		i++
	}
	switch {
	case i == len(ls):
		delete(rr.by, k)
		return nil
	case i > 0:
		ls = slices.Clone(ls[i:])
		rr.by[k] = ls
	}
	return ls
}

// of is ReadsOf from memory: the leases of who issued before until.
func (r *liveReads) of(who shredd.Reader, now, until int64, limit int) []shredd.Lease {
	rr := r.reader(who.Token, false)
	if rr == nil {
		return nil
	}
	rr.mu.Lock()
	var out []shredd.Lease
	take := func(k unitHolder) {
		for _, l := range rr.prune(k, now) {
			if l.IssuedAt.UnixNano() < until {
				out = append(out, l)
			}
		}
	}
	if who.Unit != "" && who.Holder != "" {
		for _, k := range []unitHolder{{who.Unit, who.Holder}, {who.Unit, ""}, {"", who.Holder}, {"", ""}} {
			if _, ok := rr.by[k]; ok {
				take(k)
			}
		}
	} else {
		for k := range rr.by {
			if matches(k.unit, who.Unit) && matches(k.holder, who.Holder) {
				take(k)
			}
		}
	}
	rr.mu.Unlock()
	return byExpiry(out, limit)
}

// matches says whether a lease's unit or holder v matches a writer's w:
// equal, or either empty.
func matches(v, w string) bool { return v == w || v == "" || w == "" }

// load fills r from the live leases of db.
func (r *liveReads) load(ctx context.Context, db *storage.DB, now int64) error {
	live, err := queryLeases(ctx, db, leaseCols+` WHERE reader IS NOT NULL AND expires_at > ? ORDER BY expires_at`, now)
	if err != nil {
		return fmt.Errorf("registry: leases: %w", err)
	}
	ls := make([]*shredd.Lease, len(live))
	for i := range live {
		ls[i] = &live[i]
	}
	r.add(ls, now)
	return nil
}

// matching is the values of a lease's unit or holder that a writer's v
// matches: "" and v itself, or any (a nil entry) when v is empty.
func matching(v string) []*string {
	if v == "" {
		return []*string{nil}
	}
	empty := ""
	return []*string{&empty, &v}
}

// GetLease returns a lease.
func (s *Registry) GetLease(ctx context.Context, id shredd.ID) (shredd.Lease, error) {
	l, err := scanLease(s.db.QueryRowContext(ctx, leaseCols+` WHERE id=?`, id[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Lease{}, fmt.Errorf("registry: lease %s: %w", id, shredd.ErrNotFound)
	}
	if err != nil {
		return shredd.Lease{}, fmt.Errorf("registry: lease: %w", err)
	}
	return l, nil
}

// ReleaseLease ends a lease early: its holder has dropped the plaintext.
// holder, when not empty, must be the lease's holder (ErrForbidden).
func (s *Registry) ReleaseLease(ctx context.Context, id shredd.ID, holder string) (shredd.Lease, error) {
	l, err := s.GetLease(ctx, id)
	if err != nil {
		return shredd.Lease{}, err
	}
	if holder != "" && l.Holder != holder {
		return shredd.Lease{}, fmt.Errorf("registry: lease %s belongs to another holder: %w", id, shredd.ErrForbidden)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE leases SET released_at=coalesce(released_at, ?) WHERE id=?`, s.opts.Now().UnixNano(), id[:]); err != nil {
		return shredd.Lease{}, fmt.Errorf("registry: release lease: %w", err)
	}
	return s.GetLease(ctx, id)
}

// RecordRefused keeps that a write was refused for leaving leases
// undeclared (derivation.Graph.RecordRefused): the forgets of their
// lineages count it. A refused write is evidence that its writer still
// holds what it read: each lease's attribution (its expiry) is extended to
// a lease TTL from now, so a retry after the lease would have expired is
// still its writer's to answer for (the lease stays live for a forget's
// workers_quiesced too, unless released). At most to MaxExtensions lease
// TTLs after its issue: a writer that keeps retrying cannot hold up a
// forget of what it read for ever.
func (s *Registry) RecordRefused(ctx context.Context, leases []shredd.ID) error {
	if err := s.graph.RecordRefused(ctx, leases); err != nil {
		return err
	}
	until := s.opts.Now().Add(s.opts.LeaseTTL).UnixNano()
	limit := int64(1+MaxExtensions) * int64(s.opts.LeaseTTL)
	const capped = `(CASE WHEN ?1 < issued_at + ?2 THEN ?1 ELSE issued_at + ?2 END)` // least(), in both engines' SQL
	var extended []*shredd.Lease
	for _, id := range leases {
		if _, err := s.db.ExecContext(ctx, `UPDATE leases SET expires_at = `+capped+` WHERE id = ?3 AND expires_at < `+capped,
			until, limit, id[:]); err != nil {
			return fmt.Errorf("registry: extend lease: %w", err)
		}
		l, err := s.GetLease(ctx, id)
		if err != nil {
			return err
		}
		extended = append(extended, &l)
	}
	if !s.db.Shared() {
		s.reads.extend(extended, s.opts.Now().UnixNano())
	}
	return nil
}
