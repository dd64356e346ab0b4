package erasure

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/keystore"
)

// MaxReasonBytes bounds a reinstatement's reason.
const MaxReasonBytes = 1000

// Reinstatements give forgotten subjects a new life (shredd.Reinstater).
// They share an Eraser's state.
type Reinstatements struct{ s *Eraser }

// NewReinstatements returns the reinstatements of s's subjects.
func NewReinstatements(s *Eraser) Reinstatements { return Reinstatements{s} }

var _ shredd.Reinstater = Reinstatements{}

// Reinstate gives a forgotten subject a new key generation, explicitly: an
// operator's act, never a side effect of a write (docs/api.md,
// "Reinstating a subject"). The subject's forget must be erased: its proof
// is signed and stored, so that nothing the new generation does (new
// artifacts of the same subject, a later forget) can reach it, and a
// reinstatement cannot cut an erasure short. In one transaction, under
// the subject's barrier lock: the new key (keystore.Tree.ReinstateTx, its
// key_created event), the forget marked as followed by a reinstatement
// (the database holds one forget per subject's life, so the next forget
// of the subject is a new one), the subject_reinstated log event and the
// reinstatement's record with the operator's reason. Every older
// generation stays destroyed: what was sealed under it, and what names it
// in its lineage, stays refused (ErrShredded). The forget itself, its
// proof and its attestation are not changed.
func (rs Reinstatements) Reinstate(ctx context.Context, subject, reason string) (shredd.Reinstatement, error) {
	s, lives := rs.s, keystore.NewLives(rs.s.keys)
	if err := checkSubject(subject); err != nil {
		return shredd.Reinstatement{}, err
	}
	if len(reason) > MaxReasonBytes || !utf8.ValidString(reason) {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: reason must be valid UTF-8 of at most %d bytes: %w", MaxReasonBytes, shredd.ErrInvalid)
	}
	if s.keys.PerSubject() {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: per-subject keys (the subject's own Transit key is named by its keyed hash, and its destruction is read back by that name): %w", shredd.ErrUnsupported)
	}
	sid := s.hasher.SID(subject)
	defer s.reg.LockSubject(sid)()
	// The forget of the subject's current life: none (a subject never
	// forgotten, or reinstated already) is a conflict, not a new life.
	r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE sid=? AND reinstated_at IS NULL`, sid[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", shredd.ErrNotForgotten)
	}
	if err != nil {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", err)
	}
	if !r.erased.Valid {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: forget %s is %s: %w", r.id, r.state, shredd.ErrNotErased)
	}
	// Above every generation any forget of the subject destroyed, not only
	// the tombstone's: a generation number is never given twice.
	var floor int64
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(gen), 0) FROM forgets WHERE sid=?`, sid[:]).Scan(&floor); err != nil {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", err)
	}
	now := s.opts.Now().UTC()
	tx, err := s.db.BeginTouching(ctx, lives.Reinstating(sid))
	if err != nil {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", err)
	}
	defer tx.Rollback()
	got, err := lives.ReinstateTx(ctx, tx, sid, subject, uint32(floor))
	switch {
	case errors.Is(err, keystore.ErrNotForgotten):
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", shredd.ErrNotForgotten)
	case errors.Is(err, keystore.ErrRootUnavailable):
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w: %w", shredd.ErrUnavailable, err)
	case err != nil:
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", err)
	}
	done := false
	defer func() {
		if !done {
			clear(got.Key.Key)
		}
	}()
	res, err := tx.ExecContext(ctx, `UPDATE forgets SET reinstated_at=? WHERE id=? AND reinstated_at IS NULL`, now.UnixNano(), r.id[:])
	if err != nil {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", shredd.ErrNotForgotten) // another node's reinstatement won
	}
	logIndex := int64(-1)
	if j := s.opts.Journal; j != nil {
		if logIndex, err = j.SubjectReinstated(ctx, tx, got.Key, subject, got.Previous, r.id.String()); err != nil {
			return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", err)
		}
	}
	if err := lives.Record(ctx, tx, got, r.id[:], now.UnixNano(), logIndex, reason); err != nil {
		return shredd.Reinstatement{}, err
	}
	if err := tx.Commit(); err != nil {
		return shredd.Reinstatement{}, fmt.Errorf("erasure: reinstate: %w", err)
	}
	crashpoint.Hit("reinstate:committed")
	done = true
	lives.Remember(got.Key)
	clear(got.Key.Key)
	return shredd.Reinstatement{Generation: got.Key.Ref.Gen, PreviousGeneration: got.Previous, Forget: r.id,
		LogIndex: logIndex, ReinstatedAt: now}, nil
}
