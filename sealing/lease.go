package sealing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
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

// leaseWriter commits leases in groups: every decrypt needs its lease durable
// before the plaintext leaves, and one transaction (one fsync) per decrypt
// would bound decrypts by the disk. Requests that arrive while a commit runs
// share the next one.
func (s *Service) leaseWriter() {
	for first := range s.leaseQ {
		batch := []leaseReq{first}
	collect:
		for len(batch) < 512 {
			select {
			case r, ok := <-s.leaseQ:
				if !ok {
					break collect
				}
				batch = append(batch, r)
			default:
				break collect
			}
		}
		err := s.writeLeases(batch)
		for _, r := range batch {
			if err == nil {
				r.done <- r.err
			} else {
				r.done <- err
			}
		}
		s.kickCheckpoint()
	}
}

func (s *Service) writeLeases(batch []leaseReq) error {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sealing: lease: %w", err)
	}
	defer tx.Rollback()
	for i := range batch {
		r := &batch[i]
		// Where nodes share the database, a forget committed on another
		// node holds no barrier lock here: the lineage is checked live in
		// the lease's own transaction, which the write lock orders against
		// the forget's commit (either the forget sees the lease, or the
		// lease sees the tombstone). One node's barrier locks order it.
		if s.db.Shared() {
			if err := s.keys.CheckLive(ctx, tx, r.refs); err != nil {
				if r.err = MapKeyErr(err); !errors.Is(r.err, shredd.ErrShredded) && !errors.Is(r.err, shredd.ErrEnvelope) {
					return fmt.Errorf("sealing: lease: %w", err)
				}
				continue
			}
		}
		l := r.l
		if _, err := tx.ExecContext(ctx, `INSERT INTO leases(id, artifact, holder, issued_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			l.ID[:], l.Artifact[:], l.Holder, l.IssuedAt.UnixNano(), l.ExpiresAt.UnixNano()); err != nil {
			return fmt.Errorf("sealing: lease: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sealing: lease: %w", err)
	}
	return nil
}

// issueLease records a lease durably (group commit) and returns it.
func (s *Service) issueLease(ctx context.Context, artifact shredd.ID, holder string, refs []envelope.Ref) (shredd.Lease, error) {
	id, err := s.newID()
	if err != nil {
		return shredd.Lease{}, err
	}
	now := s.opts.Now()
	l := shredd.Lease{ID: id, Artifact: artifact, Holder: holder, IssuedAt: now, ExpiresAt: now.Add(s.opts.LeaseTTL)}
	r := leaseReq{l: l, refs: refs, done: make(chan error, 1)}
	if err := enqueue(ctx, s, s.leaseQ, r); err != nil {
		return shredd.Lease{}, fmt.Errorf("sealing: lease: %w", err)
	}
	if err := <-r.done; err != nil {
		return shredd.Lease{}, err
	}
	return l, nil
}

func scanLease(sc interface{ Scan(...any) error }) (shredd.Lease, error) {
	var l shredd.Lease
	var id, art []byte
	var issued, expires int64
	var released sql.NullInt64
	if err := sc.Scan(&id, &art, &l.Holder, &issued, &expires, &released); err != nil {
		return shredd.Lease{}, err
	}
	copy(l.ID[:], id)
	copy(l.Artifact[:], art)
	l.IssuedAt, l.ExpiresAt = time.Unix(0, issued).UTC(), time.Unix(0, expires).UTC()
	l.ReleasedAt = Time(released)
	return l, nil
}

const leaseCols = `SELECT id, artifact, holder, issued_at, expires_at, released_at FROM leases`

// GetLease returns a lease.
func (s *Service) GetLease(ctx context.Context, id shredd.ID) (shredd.Lease, error) {
	l, err := scanLease(s.db.QueryRowContext(ctx, leaseCols+` WHERE id=?`, id[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Lease{}, fmt.Errorf("sealing: lease %s: %w", id, shredd.ErrNotFound)
	}
	if err != nil {
		return shredd.Lease{}, fmt.Errorf("sealing: lease: %w", err)
	}
	return l, nil
}

// ReleaseLease ends a lease early: its holder has dropped the plaintext.
// holder, when not empty, must be the lease's holder (ErrForbidden).
func (s *Service) ReleaseLease(ctx context.Context, id shredd.ID, holder string) (shredd.Lease, error) {
	l, err := s.GetLease(ctx, id)
	if err != nil {
		return shredd.Lease{}, err
	}
	if holder != "" && l.Holder != holder {
		return shredd.Lease{}, fmt.Errorf("sealing: lease %s belongs to another holder: %w", id, shredd.ErrForbidden)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE leases SET released_at=coalesce(released_at, ?) WHERE id=?`, s.opts.Now().UnixNano(), id[:]); err != nil {
		return shredd.Lease{}, fmt.Errorf("sealing: release lease: %w", err)
	}
	return s.GetLease(ctx, id)
}

// Close stops the background lease and registration writers once they
// have answered what was queued. Calls after Close that need a lease or a
// registration fail with ErrUnavailable.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		defer s.closeMu.Unlock()
		s.closed = true
		close(s.leaseQ)
		close(s.recordQ)
		close(s.stop)
	})
}

// Time is the time of a nullable column of Unix nanoseconds (zero for
// NULL), as the registry's tables keep times.
func Time(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}
