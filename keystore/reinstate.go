package keystore

import (
	"context"
	"errors"
	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
)

// Reinstatement: an operator gives a forgotten subject a new key generation
// (docs/api.md, "Reinstating a subject"). The tombstone's row becomes live
// again at the next generation, with a fresh key; every older generation
// stays destroyed (liveAt: a reference below the subject's generation is
// ErrShredded), so what was sealed under them stays unreadable.

// Errors of a reinstatement.
var (
	// ErrNotForgotten means the subject has no destroyed key to follow: it
	// is live, or was never seen.
	ErrNotForgotten = errors.New("subject not forgotten")
	// ErrPerSubjectReinstate means the key tree keeps each subject key in
	// its own external key (SubjectKMS), named by the subject's keyed hash:
	// a new generation would need a new external key under the same name,
	// which the destroyed key's read-back (CheckShredded) would then find.
	ErrPerSubjectReinstate = errors.New("reinstatement is not available with per-subject keys")
)

// Lives are the reinstatements of a Tree's subjects: what starts a
// forgotten subject's new life. They share the Tree's state.
type Lives struct{ t *Tree }

// NewLives returns the reinstatements of t.
func NewLives(t *Tree) Lives { return Lives{t} }

// Reinstated is what ReinstateTx did: the new key and the generation it
// follows.
type Reinstated struct {
	Key      envelope.SubjectKey // the new generation's key (Ref.Gen the new generation)
	Previous uint32              // the destroyed generation (0: the subject never had a key)
}

// Reinstating is what a reinstatement of sid declares (storage.TxOptions):
// its shard, alone, as a forget does, so that it waits for forgets and
// bucket re-keys of the shard and they wait for it.
func (l Lives) Reinstating(sid envelope.SID) storage.TxOptions {
	return storage.TxOptions{Exclusive: true, Shards: []int{l.t.ShardOf(sid)}}
}

// ReinstateTx starts, inside tx (begun with Reinstating), a new key
// generation for the forgotten subject sid: generation above both the
// tombstone's and floor (the highest generation the caller knows was ever
// issued, such as the forgets' records), with a fresh key wrapped under
// the bucket's current key. It logs the key's key_created event (when
// there is a journal) with subject, the raw id, which is never stored, and
// records the reinstatement (forget, reason, logIndex: see
// Record). A live or unknown subject gives ErrNotForgotten;
// per-subject keys give ErrPerSubjectReinstate. The caller commits tx and
// then calls Remember.
func (l Lives) ReinstateTx(ctx context.Context, tx *storage.Tx, sid envelope.SID, subject string, floor uint32) (Reinstated, error) {
	t := l.t
	if t.kms != nil {
		return Reinstated{}, fmt.Errorf("keystore: reinstate: %w", ErrPerSubjectReinstate)
	}
	r, err := t.row(ctx, tx, sid)
	if err != nil {
		return Reinstated{}, err
	}
	if r.state != SubjectForgotten {
		return Reinstated{}, fmt.Errorf("keystore: reinstate: %w", ErrNotForgotten)
	}
	gen := max(r.gen, floor) + 1
	if gen == 0 {
		return Reinstated{}, fmt.Errorf("keystore: reinstate: generations exhausted: %w", shredd.ErrConflict)
	}
	b := t.BucketOf(sid)
	bgen, bk, err := t.bucketKey(ctx, b)
	if err != nil {
		return Reinstated{}, err
	}
	dek := newKey()
	blob := wrapDEK(bk, dek, dekAAD(sid, gen, b, bgen))
	clear(bk)
	// Only while the bucket is still at the generation that wrapped the
	// DEK (the shard's lock keeps re-keys out; this says so again).
	res, err := tx.ExecContext(ctx, `UPDATE subjects SET gen=?, state=?, bucket_gen=?, wrapped=?, forgotten_at=NULL
		WHERE bucket=? AND sid=? AND state=? AND gen=? AND EXISTS (SELECT 1 FROM buckets WHERE id=? AND gen=?)`,
		gen, SubjectLive, bgen, blob, b, sid[:], SubjectForgotten, r.gen, b, bgen)
	if err != nil {
		clear(dek)
		return Reinstated{}, fmt.Errorf("keystore: reinstate: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		clear(dek)
		return Reinstated{}, fmt.Errorf("keystore: reinstate: the subject's bucket was re-keyed meanwhile: %w", ErrRootUnavailable)
	}
	k := envelope.SubjectKey{Ref: envelope.Ref{SID: sid, Gen: gen}, Key: dek}
	if err := t.journalKey(ctx, tx, k, subject); err != nil {
		clear(dek)
		return Reinstated{}, err
	}
	return Reinstated{Key: k, Previous: r.gen}, nil
}

// Record records in tx the reinstatement rs of sid: the
// forget whose destroyed generation it follows, when (Unix nanoseconds),
// the log index of its subject_reinstated event (-1 without a log) and the
// operator's reason.
func (l Lives) Record(ctx context.Context, tx *storage.Tx, rs Reinstated, forget []byte, at, logIndex int64, reason string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO reinstatements(sid, gen, prev_gen, forget, reinstated_at, log_index, reason) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		rs.Key.Ref.SID[:], rs.Key.Ref.Gen, rs.Previous, forget, at, logIndex, reason); err != nil {
		return fmt.Errorf("keystore: reinstate: %w", err)
	}
	return nil
}

// Remember caches the key of a committed reinstatement.
func (l Lives) Remember(k envelope.SubjectKey) {
	l.t.remember(k.Ref.SID, k.Ref.Gen, k.Key, l.t.purges.Load())
}

// LifeFloors returns, for each of sids that was ever reinstated, the first
// generation of its current life (its newest reinstatement's): the
// lineage a forget of the subject reaches is the artifacts of that
// generation on; the older ones were erased by the forgets before it.
// Subjects never reinstated are absent (floor 0: every generation).
func (t *Tree) LifeFloors(ctx context.Context, q storage.Querier, sids []envelope.SID) (map[envelope.SID]uint32, error) {
	out := map[envelope.SID]uint32{}
	for len(sids) > 0 {
		chunk := sids[:min(len(sids), maxLiveQuery)]
		sids = sids[len(chunk):]
		args := make([]any, len(chunk))
		for i, sid := range chunk {
			args[i] = sid[:]
		}
		rows, err := q.QueryContext(ctx, `SELECT sid, max(gen) FROM reinstatements WHERE sid IN (`+marks(len(chunk))+`) GROUP BY sid`, args...)
		if err != nil {
			return nil, fmt.Errorf("keystore: reinstatements: %w", err)
		}
		for rows.Next() {
			var b []byte
			var g int64
			if err := rows.Scan(&b, &g); err != nil {
				rows.Close()
				return nil, fmt.Errorf("keystore: reinstatements: %w", err)
			}
			out[envelope.SID(b)] = uint32(g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("keystore: reinstatements: %w", err)
		}
	}
	return out, nil
}
