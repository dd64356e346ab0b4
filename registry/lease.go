package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
)

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
// reader, not expired (released or not: a release says the holder dropped
// the plaintext, not that nothing was derived from it meanwhile), whose
// holder and unit match the writer's (equal, or either empty). At most
// limit leases, by expiry.
func (s *Registry) ReadsOf(ctx context.Context, who shredd.Reader, limit int) ([]shredd.Lease, error) {
	rows, err := s.db.QueryContext(ctx, leaseCols+` WHERE reader = ? AND expires_at > ?
		AND (? = '' OR holder = '' OR holder = ?) AND (? = '' OR unit = '' OR unit = ?) ORDER BY expires_at LIMIT ?`,
		who.Token, s.opts.Now().UnixNano(), who.Holder, who.Holder, who.Unit, who.Unit, limit)
	if err != nil {
		return nil, fmt.Errorf("registry: reads: %w", err)
	}
	defer rows.Close()
	var out []shredd.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("registry: reads: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("registry: reads: %w", err)
	}
	return out, nil
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
// lineages count it.
func (s *Registry) RecordRefused(ctx context.Context, leases []shredd.ID) error {
	return s.graph.RecordRefused(ctx, leases)
}
