package derivation

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/translog"
)

// LabelCommitmentSalt is the domain-separation label of the salt derived
// from a subject key for the subject commitments of its log events.
const LabelCommitmentSalt = "shredd/v1/commitment-salt"

// Journal writes shredd's lifecycle events (attest.Event, signed by the
// service's attestation key) to the transparency log, each in the
// transaction of the change it records: key creations and epochs (as the
// key tree's keystore.Journal), forget commits, holder acks and erasure
// attestations (through the Service, Options.Journal).
type Journal struct {
	log    *translog.Log
	logKey string // the log's note verifier key, for exports
	signer ed25519.PrivateKey
	now    func() time.Time
}

var _ keystore.Journal = (*Journal)(nil)

// NewJournal returns a journal appending to log (whose note verifier key
// is logKey), signing events with signer (the attestation key). now is the clock (time.Now when nil).
func NewJournal(ctx context.Context, db *sql.DB, log *translog.Log, logKey string, signer ed25519.PrivateKey, now func() time.Time) (*Journal, error) {
	if log == nil || len(signer) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("derivation: journal needs a log and an Ed25519 key: %w", ErrInvalid)
	}
	if now == nil {
		now = time.Now
	}
	return &Journal{log: log, logKey: logKey, signer: signer, now: now}, nil
}

// commitmentSalt derives the salt of a subject's commitments from its key:
// it exists only while the key does, so the forget that destroys the key
// can hand it to its caller (and nobody can recompute it afterwards).
func commitmentSalt(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(LabelCommitmentSalt))
	return m.Sum(nil)
}

// append signs ev and appends it in tx.
func (j *Journal) append(ctx context.Context, tx *sql.Tx, ev attest.Event) (int64, error) {
	ev.Type = attest.EventType
	ev.Time = j.now().UTC()
	entry, err := attest.SignEvent(ev, j.signer)
	if err != nil {
		return 0, fmt.Errorf("derivation: log %s: %w", ev.Event, err)
	}
	idx, err := j.log.Append(ctx, tx, entry)
	if err != nil {
		return 0, fmt.Errorf("derivation: log %s: %w", ev.Event, err)
	}
	return idx, nil
}

// KeyCreated logs a key_created event with the salted commitment to the
// subject id, and remembers its index for the forget of that key.
func (j *Journal) KeyCreated(ctx context.Context, tx *sql.Tx, k envelope.SubjectKey, subject string) error {
	if subject == "" {
		return fmt.Errorf("derivation: a key created without its subject id cannot be committed to in the log: %w", ErrInvalid)
	}
	idx, err := j.append(ctx, tx, attest.Event{Event: attest.EventKeyCreated,
		Key: &attest.KeyEvent{Subject: attest.Commit(subject, commitmentSalt(k.Key)), Generation: k.Ref.Gen}})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO subject_log(sid, gen, key_created) VALUES (?, ?, ?)`,
		k.Ref.SID[:], k.Ref.Gen, idx); err != nil {
		return fmt.Errorf("derivation: log key_created: %w", err)
	}
	return nil
}

// EpochCompleted logs an epoch_completed event.
func (j *Journal) EpochCompleted(ctx context.Context, tx *sql.Tx, e keystore.Epoch, rootStore string) error {
	retired := e.Retired
	if retired == nil {
		retired = []int{}
	}
	idx, err := j.append(ctx, tx, attest.Event{Event: attest.EventEpochCompleted, Epoch: &attest.EpochEvent{
		Epoch: e.ID, RootStore: rootStore, FromVersion: e.FromVersion, ToVersion: e.ToVersion, Retired: retired}})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO epoch_log(epoch, idx) VALUES (?, ?)`, e.ID, idx); err != nil {
		return fmt.Errorf("derivation: log epoch_completed: %w", err)
	}
	return nil
}

// appendForget appends an event of forget id in tx and remembers its index
// with the forget.
func (j *Journal) appendForget(ctx context.Context, tx *sql.Tx, id ID, ev attest.Event) error {
	idx, err := j.append(ctx, tx, ev)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO forget_log(forget, idx) VALUES (?, ?)`, id[:], idx); err != nil {
		return fmt.Errorf("derivation: log %s: %w", ev.Event, err)
	}
	return nil
}

// keyCreatedIndex returns the log index of the key_created event of a
// subject key generation, or -1 when the log holds none.
func keyCreatedIndex(ctx context.Context, q querier, sid envelope.SID, gen uint32) (int64, error) {
	var idx int64
	err := q.QueryRowContext(ctx, `SELECT key_created FROM subject_log WHERE sid=? AND gen=?`, sid[:], gen).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("derivation: log: %w", err)
	}
	return idx, nil
}

// subjectSalt returns the salt of a new forget's subject commitment: the
// one derived from the subject's live key, so that the forget, its
// attestation and the key's key_created event carry the same commitment;
// a fresh random salt when the subject has no key or the key cannot be
// read now (a root store down must not stop a forget).
func (s *Service) subjectSalt(ctx context.Context, sid envelope.SID) []byte {
	st, gen, err := s.keys.State(ctx, sid)
	if err == nil && st == keystore.SubjectLive {
		if k, err := s.keys.KeyAt(ctx, envelope.Ref{SID: sid, Gen: gen}); err == nil {
			return commitmentSalt(k.Key)
		}
	}
	return attest.NewSalt()
}

// querier reads through a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}
