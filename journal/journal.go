// Package journal writes shredd's lifecycle events (attest.Event, signed by
// the service's attestation key) to the transparency log, each in the
// transaction of the change it records (docs/transparency.md). It sits
// below the key tree and the registry, which call it; it calls nothing
// above it.
package journal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/translog"
)

// LabelCommitmentSalt is the domain-separation label of the salt derived
// from a subject key for the subject commitments of its log events.
const LabelCommitmentSalt = "shredd/v1/commitment-salt"

// ErrInvalid means the journal was given what it cannot log: no log or
// signer, or a key creation without its subject id.
var ErrInvalid = errors.New("journal: invalid argument")

// Journal appends the lifecycle events: key creations and epochs (from the
// key tree), forget commits, holder acks and erasure attestations (from the
// registry). Each method takes the transaction of the change, so that an
// event is logged if and only if its change commits.
type Journal struct {
	log    *translog.Log
	logKey string // the log's note verifier key, for exports
	signer *attest.Signer
	now    func() time.Time
}

// New returns a journal appending to log (whose note verifier key is
// logKey), its events signed by signer (the service's attestation key).
// now is the clock (time.Now when nil).
func New(log *translog.Log, logKey string, signer *attest.Signer, now func() time.Time) (*Journal, error) {
	if log == nil || signer == nil {
		return nil, fmt.Errorf("journal: needs a log and a signer: %w", ErrInvalid)
	}
	if now == nil {
		now = time.Now
	}
	return &Journal{log: log, logKey: logKey, signer: signer, now: now}, nil
}

// Log returns the transparency log the journal appends to.
func (j *Journal) Log() *translog.Log { return j.log }

// LogKey returns the log's note verifier key.
func (j *Journal) LogKey() string { return j.logKey }

// CommitmentSalt derives the salt of a subject's commitments from its key:
// it exists only while the key does, so the forget that destroys the key
// can hand it to its caller (and nobody can recompute it afterwards).
func CommitmentSalt(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(LabelCommitmentSalt))
	return m.Sum(nil)
}

// append signs ev and appends it in tx.
func (j *Journal) append(ctx context.Context, tx *storage.Tx, ev attest.Event) (int64, error) {
	ev.Type = attest.EventType
	ev.Time = j.now().UTC()
	entry, err := j.signer.SignEvent(ev)
	if err != nil {
		return 0, fmt.Errorf("journal: log %s: %w", ev.Event, err)
	}
	idx, err := j.log.Append(ctx, tx, entry)
	if err != nil {
		return 0, fmt.Errorf("journal: log %s: %w", ev.Event, err)
	}
	return idx, nil
}

// KeyCreated logs a key_created event with the salted commitment to the
// subject id, and remembers its index for the forget of that key.
func (j *Journal) KeyCreated(ctx context.Context, tx *storage.Tx, k envelope.SubjectKey, subject string) error {
	if subject == "" {
		return fmt.Errorf("journal: a key created without its subject id cannot be committed to in the log: %w", ErrInvalid)
	}
	idx, err := j.append(ctx, tx, attest.Event{Event: attest.EventKeyCreated,
		Key: &attest.KeyEvent{Subject: attest.Commit(subject, CommitmentSalt(k.Key)), Generation: k.Ref.Gen}})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO subject_log(sid, gen, key_created) VALUES (?, ?, ?)
		ON CONFLICT(sid, gen) DO UPDATE SET key_created=excluded.key_created`,
		k.Ref.SID[:], k.Ref.Gen, idx); err != nil {
		return fmt.Errorf("journal: log key_created: %w", err)
	}
	return nil
}

// SubjectReinstated logs a subject_reinstated event for the new key k of
// a reinstated subject (subject its raw id, committed to under k as the
// key_created event of k is), after generation previous that forget
// destroyed, and returns its log index. The new key's key_created event is
// the key tree's (KeyCreated), in the same transaction.
func (j *Journal) SubjectReinstated(ctx context.Context, tx *storage.Tx, k envelope.SubjectKey, subject string, previous uint32, forget string) (int64, error) {
	if subject == "" {
		return 0, fmt.Errorf("journal: a reinstatement without its subject id cannot be committed to in the log: %w", ErrInvalid)
	}
	return j.append(ctx, tx, attest.Event{Event: attest.EventSubjectReinstated,
		Reinstated: &attest.ReinstatedEvent{Subject: attest.Commit(subject, CommitmentSalt(k.Key)), Generation: k.Ref.Gen, Previous: previous, Forget: forget}})
}

// EpochCompleted logs an epoch_completed event.
func (j *Journal) EpochCompleted(ctx context.Context, tx *storage.Tx, e attest.EpochEvent) error {
	if e.Retired == nil {
		e.Retired = []int{}
	}
	idx, err := j.append(ctx, tx, attest.Event{Event: attest.EventEpochCompleted, Epoch: &e})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO epoch_log(epoch, idx) VALUES (?, ?)
		ON CONFLICT(epoch) DO UPDATE SET idx=excluded.idx`, e.Epoch, idx); err != nil {
		return fmt.Errorf("journal: log epoch_completed: %w", err)
	}
	return nil
}

// AppendForget appends an event of the forget id in tx and remembers its
// index with the forget, for the regulator export.
func (j *Journal) AppendForget(ctx context.Context, tx *storage.Tx, id [16]byte, ev attest.Event) error {
	return j.AppendForgets(ctx, tx, [][16]byte{id}, []attest.Event{ev})
}

// forgetLogRows is how many rows one INSERT INTO forget_log of
// AppendForgets writes.
const forgetLogRows = 300

// AppendForgets is AppendForget for many forgets (ids[i]'s event is
// evs[i]), in order, with one append to the log (translog.Log.AppendBatch)
// and multi-row inserts: a group commit of forgets paid the log's reads
// and writes once per forget, under the write lock. It is SignForgets,
// then AppendSigned.
func (j *Journal) AppendForgets(ctx context.Context, tx *storage.Tx, ids [][16]byte, evs []attest.Event) error {
	signed, err := j.SignForgets(evs)
	if err != nil {
		return err
	}
	return j.AppendSigned(ctx, tx, ids, signed)
}

// Signed is the log entries of forget events SignForgets signed, for
// AppendSigned.
type Signed struct {
	event   string // the first event's name, for errors
	entries [][]byte
}

// parallelSign is the fewest events SignForgets gives a goroutine of its
// own (so a group signs on two processors from 16 events): for fewer,
// starting goroutines costs more than it saves.
const parallelSign = 8

// SignForgets signs the forget events evs as log entries, stamped with
// the journal's clock now, on up to every processor (parallelSign). A
// forget group signs its events before it takes the sequence lock
// (storage.Tx.Sequence): the signatures (about 40 µs each) are not a wait
// for the writers queued behind that lock.
func (j *Journal) SignForgets(evs []attest.Event) (Signed, error) {
	if len(evs) == 0 {
		return Signed{}, nil
	}
	now := j.now().UTC()
	entries := make([][]byte, len(evs))
	errs := make([]error, len(evs))
	sign := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ev := evs[i]
			ev.Type, ev.Time = attest.EventType, now
			entries[i], errs[i] = j.signer.SignEvent(ev)
		}
	}
	if workers := min(runtime.GOMAXPROCS(0), len(evs)/parallelSign); workers > 1 {
		var wg sync.WaitGroup
		per := (len(evs) + workers - 1) / workers
		for lo := 0; lo < len(evs); lo += per {
			wg.Add(1)
			go func(lo, hi int) {
				defer wg.Done()
				sign(lo, hi)
			}(lo, min(lo+per, len(evs)))
		}
		wg.Wait()
	} else {
		sign(0, len(evs))
	}
	for i, err := range errs {
		if err != nil {
			return Signed{}, fmt.Errorf("journal: log %s: %w", evs[i].Event, err)
		}
	}
	return Signed{event: evs[0].Event, entries: entries}, nil
}

// AppendSigned appends the entries SignForgets signed, for the forgets
// ids (ids[i]'s the i-th event), in tx, as AppendForgets does.
func (j *Journal) AppendSigned(ctx context.Context, tx *storage.Tx, ids [][16]byte, signed Signed) error {
	entries := signed.entries
	if len(ids) != len(entries) {
		return fmt.Errorf("journal: %d forgets for %d events: %w", len(ids), len(entries), ErrInvalid)
	}
	if len(ids) == 0 {
		return nil
	}
	first, err := j.log.AppendBatch(ctx, tx, entries)
	if err != nil {
		return fmt.Errorf("journal: log %s: %w", signed.event, err)
	}
	for start := 0; start < len(ids); start += forgetLogRows {
		end := min(start+forgetLogRows, len(ids))
		args := make([]any, 0, 2*(end-start))
		for i := start; i < end; i++ {
			args = append(args, ids[i][:], first+int64(i))
		}
		q := `INSERT INTO forget_log(forget, idx) VALUES ` + strings.TrimSuffix(strings.Repeat("(?, ?),", end-start), ",")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("journal: log %s: %w", signed.event, err)
		}
	}
	return nil
}

// KeyCreatedIndex returns the log index of the key_created event of a
// subject key generation, or -1 when the log holds none.
func KeyCreatedIndex(ctx context.Context, q storage.Querier, sid envelope.SID, gen uint32) (int64, error) {
	var idx int64
	err := q.QueryRowContext(ctx, `SELECT key_created FROM subject_log WHERE sid=? AND gen=?`, sid[:], gen).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: log: %w", err)
	}
	return idx, nil
}

// KeyCreatedIndexes is KeyCreatedIndex for many subject key generations
// (gens[i] of sids[i]) in one statement per forgetLogRows of them: a
// forget group reads them inside the transaction that holds the write
// lock, where a statement each made the lock wait a round trip each.
func KeyCreatedIndexes(ctx context.Context, q storage.Querier, sids []envelope.SID, gens []uint32) ([]int64, error) {
	if len(sids) != len(gens) {
		return nil, fmt.Errorf("journal: %d generations for %d subjects: %w", len(gens), len(sids), ErrInvalid)
	}
	type key struct {
		sid envelope.SID
		gen uint32
	}
	found := make(map[key]int64, len(sids))
	for start := 0; start < len(sids); start += forgetLogRows {
		end := min(start+forgetLogRows, len(sids))
		args := make([]any, 0, end-start)
		for _, sid := range sids[start:end] {
			args = append(args, sid[:])
		}
		rows, err := q.QueryContext(ctx, `SELECT sid, gen, key_created FROM subject_log WHERE sid IN (`+
			strings.TrimSuffix(strings.Repeat("?, ", end-start), ", ")+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("journal: log: %w", err)
		}
		for rows.Next() {
			var b []byte
			var k key
			var idx int64
			if err := rows.Scan(&b, &k.gen, &idx); err != nil {
				rows.Close()
				return nil, fmt.Errorf("journal: log: %w", err)
			}
			copy(k.sid[:], b)
			found[k] = idx
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("journal: log: %w", err)
		}
	}
	out := make([]int64, len(sids))
	for i, sid := range sids {
		idx, ok := found[key{sid, gens[i]}]
		if !ok {
			idx = -1
		}
		out[i] = idx
	}
	return out, nil
}

// ForgetIndexes returns the log indexes of the events of the forget id
// (AppendForget), in log order.
func ForgetIndexes(ctx context.Context, q storage.Querier, id [16]byte) ([]int64, error) {
	idxs, err := storage.Column[int64](ctx, q, `SELECT idx FROM forget_log WHERE forget=? ORDER BY idx`, id[:])
	if err != nil {
		return nil, fmt.Errorf("journal: forget log: %w", err)
	}
	return idxs, nil
}

// EpochIndex returns the log index of the epoch_completed event of an
// epoch (EpochCompleted), or -1 when the log holds none.
func EpochIndex(ctx context.Context, q storage.Querier, epoch int64) (int64, error) {
	var idx int64
	err := q.QueryRowContext(ctx, `SELECT idx FROM epoch_log WHERE epoch=?`, epoch).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("journal: epoch log: %w", err)
	}
	return idx, nil
}

// Signer returns the signer of the journal's events; the erasure signs
// its attestations with the same one.
func (j *Journal) Signer() *attest.Signer { return j.signer }
