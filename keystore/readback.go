package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
)

// The read-backs: before a forget's state claims a fact, the fact is read
// back from where it lives (docs/design.md, "Read back before claiming").
// Each returns nil when the fact holds, an error wrapping ErrReadBack with
// what was found when it does not, and another error (ErrRootUnavailable
// for a root store that does not answer) when it could not be read. None
// of them trusts a cache or the database's own record of an earlier step.

// KeyGoneTx reads back, in tx, that subject sid's key is destroyed: its row
// is the tombstone (state forgotten) and holds no wrapped key. A forget
// commits only when it holds; a database that ignores the deletion (a
// planted trigger, say) makes the forget fail instead of claim.
func (s *Shredder) KeyGoneTx(ctx context.Context, tx interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, sid envelope.SID) error {
	r, err := s.t.row(ctx, tx, sid)
	if err != nil {
		return err
	}
	return r.gone()
}

func (r subjectRow) gone() error {
	switch {
	case r.state != SubjectForgotten:
		return fmt.Errorf("keystore: %w: the subject's key row is not the forgotten tombstone after its deletion (state %d): the database did not apply the deletion", ErrReadBack, r.state)
	case r.wrapped != nil:
		return fmt.Errorf("keystore: %w: the subject's wrapped key is still stored after its deletion: the database did not apply the deletion", ErrReadBack)
	}
	return nil
}

// CheckShredded reads back what a forget's shredded state asserts, in the
// key tree: the subject's key row is still the tombstone, the subject's
// bucket key is wrapped under epoch e's root version or later (the bucket
// was re-keyed and re-wrapped), and the root store itself (asked now, not
// its last description) reports every version below e.ToVersion destroyed.
// root is the root store's report, read by the caller from the store
// itself (RootVersions) once for a batch of forgets. With per-subject keys,
// it asks the backend whether the subject's own key is gone, and e and
// root are not used.
func (s *Shredder) CheckShredded(ctx context.Context, sid envelope.SID, e shredd.Epoch, root Versions) error {
	r, err := s.t.row(ctx, s.t.db, sid)
	if err != nil {
		return err
	}
	if err := r.gone(); err != nil {
		return err
	}
	if s.t.kms != nil {
		ok, err := s.t.kms.Exists(ctx, sid)
		if err != nil {
			return fmt.Errorf("keystore: read back the subject key: %w", err)
		}
		if ok {
			return fmt.Errorf("keystore: %w: the subject's own key still exists in the key backend after its deletion", ErrReadBack)
		}
		return nil
	}
	var bv int
	err = s.t.db.QueryRowContext(ctx, `SELECT root_version FROM buckets WHERE id=?`, s.t.BucketOf(sid)).Scan(&bv)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("keystore: %w: the subject's bucket key is missing", ErrReadBack)
	}
	if err != nil {
		return fmt.Errorf("keystore: read back the bucket key: %w", err)
	}
	if bv < e.ToVersion {
		return fmt.Errorf("keystore: %w: the subject's bucket key is still wrapped under root version %d, below epoch %d's version %d", ErrReadBack, bv, e.ID, e.ToVersion)
	}
	if root.MinAvailable < e.ToVersion {
		return fmt.Errorf("keystore: %w: the %s root store still holds root version %d (epoch %d destroys every version below %d)", ErrReadBack, s.t.root.Kind(), root.MinAvailable, e.ID, e.ToVersion)
	}
	return nil
}

// RootVersions asks the root store now (not its last description) for its
// versions, for CheckShredded.
func (s *Shredder) RootVersions(ctx context.Context) (Versions, error) {
	v, err := s.t.root.Versions(ctx)
	if err != nil {
		return Versions{}, fmt.Errorf("keystore: read back the root versions: %w", err)
	}
	return v, nil
}
