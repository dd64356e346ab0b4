package keystore

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/storage"
)

// manyChunk bounds the subjects of one statement of ForgetManyTx and
// KeysGoneTx: at most two parameters a subject, well below any engine's
// limit on a statement's parameters (SQLite's is 32766 since 3.32), and a
// forget group (erasure) fits in one chunk.
const manyChunk = 200

// evictPayloadMax bounds one eviction notification's payload: PostgreSQL
// refuses payloads of 8000 bytes or more.
const evictPayloadMax = 7000

// ForgetManyTx is ForgetTx for many subjects in a fixed number of
// statements (per manyChunk subjects): one read of their rows, one update
// of the existing ones and one insert of tombstones for the unknown ones.
// A statement per subject made a forget group's transaction hold its
// locks for as many round trips (docs/performance-archive.md). It returns the
// generation destroyed of each subject, in the order of sids. sids must
// not repeat. The caller records the evictions with EvictManyTx in the
// same transaction, as late as it can: they take the sequence lock.
//
// The key is destroyed here, on the Shredder, with every other destruction
// of key material (bucket re-keys, root epochs, per-subject keys).
func (s *Shredder) ForgetManyTx(ctx context.Context, tx *storage.Tx, sids []envelope.SID) ([]uint32, error) {
	t := s.t
	gens := make([]uint32, 0, len(sids))
	for i := 0; i < len(sids); i += manyChunk {
		g, err := t.forgetChunk(ctx, tx, sids[i:min(i+manyChunk, len(sids))])
		if err != nil {
			return nil, err
		}
		gens = append(gens, g...)
	}
	return gens, nil
}

func (t *Tree) forgetChunk(ctx context.Context, tx *storage.Tx, sids []envelope.SID) ([]uint32, error) {
	if len(sids) == 0 {
		return nil, nil
	}
	now := t.now().UnixNano()
	rows, err := t.rows(ctx, tx, sids)
	if err != nil {
		return nil, err
	}
	gens := make([]uint32, len(sids))
	var ins []any
	for i, sid := range sids {
		r, ok := rows[sid]
		if !ok {
			ins = append(ins, sid[:], SubjectForgotten, t.BucketOf(sid), now, now)
			continue
		}
		gens[i] = r.gen
	}
	if len(rows) > 0 {
		where, args := t.inSubjects(sids)
		if _, err := tx.ExecContext(ctx, `UPDATE subjects SET state=?, wrapped=NULL, bucket_gen=NULL, forgotten_at=coalesce(forgotten_at, ?) WHERE `+where,
			append([]any{SubjectForgotten, now}, args...)...); err != nil {
			return nil, fmt.Errorf("keystore: forget: %w", err)
		}
	}
	if len(ins) > 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO subjects(sid, gen, state, bucket, created_at, forgotten_at) VALUES `+values(len(ins)/5, "(?, 0, ?, ?, ?, ?)"),
			ins...); err != nil {
			return nil, fmt.Errorf("keystore: forget: %w", err)
		}
	}
	return gens, nil
}

// EvictManyTx records in tx the evictions of sids, whose keys tx destroyed
// (ForgetManyTx), and notifies the other nodes at its commit, where nodes
// share the database.
func (s *Shredder) EvictManyTx(ctx context.Context, tx *storage.Tx, sids []envelope.SID) error {
	t := s.t
	now := t.now().UnixNano()
	for i := 0; i < len(sids); i += manyChunk {
		if err := t.evictManyTx(ctx, tx, sids[i:min(i+manyChunk, len(sids))], now); err != nil {
			return fmt.Errorf("keystore: forget: %w", err)
		}
	}
	return nil
}

// rows reads the subjects rows of sids in one statement; a subject without
// a row is not in the map.
func (t *Tree) rows(ctx context.Context, q storage.Querier, sids []envelope.SID) (map[envelope.SID]subjectRow, error) {
	where, args := t.inSubjects(sids)
	rs, err := q.QueryContext(ctx, `SELECT sid, gen, state, bucket, bucket_gen, wrapped FROM subjects WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("keystore: subject: %w", err)
	}
	defer rs.Close()
	out := make(map[envelope.SID]subjectRow, len(sids))
	for rs.Next() {
		var r subjectRow
		var b []byte
		if err := rs.Scan(&b, &r.gen, &r.state, &r.bucket, &r.bucketGen, &r.wrapped); err != nil {
			return nil, fmt.Errorf("keystore: subject: %w", err)
		}
		var sid envelope.SID
		if len(b) != len(sid) {
			return nil, fmt.Errorf("keystore: subject: a stored sid of %d bytes", len(b))
		}
		copy(sid[:], b)
		out[sid] = r
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("keystore: subject: %w", err)
	}
	return out, nil
}

// inSubjects returns the condition that selects the rows of sids by the
// table's key (bucket, sid): a row's bucket is BucketOf its sid, so the two
// lists select exactly the rows of sids.
func (t *Tree) inSubjects(sids []envelope.SID) (string, []any) {
	buckets := map[int]bool{}
	var bargs, sargs []any
	for _, sid := range sids {
		if b := t.BucketOf(sid); !buckets[b] {
			buckets[b] = true
			bargs = append(bargs, b)
		}
		sargs = append(sargs, sid[:])
	}
	return `bucket IN (` + marks(len(bargs)) + `) AND sid IN (` + marks(len(sargs)) + `)`, append(bargs, sargs...)
}

// evictManyTx is evictTx for many subjects: one insert, and one
// notification per evictPayloadMax bytes of "seq:sid" entries joined by
// commas.
func (t *Tree) evictManyTx(ctx context.Context, tx *storage.Tx, sids []envelope.SID, now int64) error {
	if !t.db.Shared() {
		return nil
	}
	// The seqs are taken under the sequence lock, so that they follow the
	// commits: a node that has applied seq n (Follow) has seen every
	// eviction below it that commits, which Converged relies on.
	if err := tx.Sequence(ctx); err != nil {
		return err
	}
	args := make([]any, 0, 2*len(sids))
	for _, sid := range sids {
		args = append(args, sid[:], now)
	}
	rs, err := tx.QueryContext(ctx, `INSERT INTO evictions(sid, at) VALUES `+values(len(sids), "(?, ?)")+` RETURNING seq, sid`, args...)
	if err != nil {
		return err
	}
	var entries []string
	for rs.Next() {
		var seq int64
		var sid []byte
		if err := rs.Scan(&seq, &sid); err != nil {
			rs.Close()
			return err
		}
		entries = append(entries, strconv.FormatInt(seq, 10)+":"+hex.EncodeToString(sid))
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return err
	}
	var payload strings.Builder
	for _, e := range entries {
		if payload.Len() > 0 && payload.Len()+1+len(e) > evictPayloadMax {
			if err := tx.Notify(ctx, EvictChannel, payload.String()); err != nil {
				return err
			}
			payload.Reset()
		}
		if payload.Len() > 0 {
			payload.WriteByte(',')
		}
		payload.WriteString(e)
	}
	if payload.Len() == 0 {
		return nil
	}
	return tx.Notify(ctx, EvictChannel, payload.String())
}

// KeysGoneTx is KeyGoneTx for many subjects, in one statement per
// manyChunk subjects: gone[i] is KeyGoneTx's answer for sids[i] (nil, or
// an error wrapping ErrReadBack), and err is a read that failed.
func (s *Shredder) KeysGoneTx(ctx context.Context, tx *storage.Tx, sids []envelope.SID) (gone []error, err error) {
	gone = make([]error, len(sids))
	for i := 0; i < len(sids); i += manyChunk {
		chunk := sids[i:min(i+manyChunk, len(sids))]
		rows, err := s.t.rows(ctx, tx, chunk)
		if err != nil {
			return nil, err
		}
		for j, sid := range chunk {
			r, ok := rows[sid]
			if !ok {
				r = subjectRow{state: SubjectUnknown}
			}
			gone[i+j] = r.gone()
		}
	}
	return gone, nil
}

// marks returns n comma-separated placeholders.
func marks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// values returns n copies of row, comma-separated: a multi-row VALUES list.
func values(n int, row string) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}
