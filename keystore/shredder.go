package keystore

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/storage"
)

// Shredder destroys keys of a Tree and proves it: it re-keys the bucket of
// a forgotten subject (RekeyBucket), runs the epochs that rotate the root
// and destroy its old versions (RunEpoch), destroys per-subject keys
// (DestroySubject), reports the epochs, and reads back what a forget's
// state claims (KeyGoneTx, CheckShredded). It shares its Tree's state: the
// tree lock, the key cache and the counters.
type Shredder struct {
	t *Tree
}

// NewShredder returns the Shredder of t. Every Shredder of a Tree acts on
// the same state, so that it does not matter which one a caller holds.
func NewShredder(t *Tree) *Shredder { return &Shredder{t: t} }

// DestroySubject destroys a forgotten subject's external key (per-subject
// mode). It is idempotent; the forget is shredded once it returned nil.
func (s *Shredder) DestroySubject(ctx context.Context, sid envelope.SID) error {
	if s.t.kms == nil {
		return fmt.Errorf("keystore: destroy subject key: not in per-subject mode: %w", shredd.ErrInvalid)
	}
	if err := s.t.kms.Destroy(ctx, sid); err != nil {
		return fmt.Errorf("keystore: destroy subject key: %w", err)
	}
	crashpoint.Hit("subject:destroyed")
	return nil
}

// rekeyChunk is the number of subject keys one re-key transaction
// rewraps: the write lock is free between chunks, so a forget's commit
// waits for one chunk, not for the whole bucket (docs/performance.md). The
// subjects of a bucket are adjacent in the table, so a chunk rewrites a
// page or two. Measured at a million subjects (about 244 keys per bucket),
// chunks of 32 gave forgets a lower p99 than chunks of 256 (one chunk per
// bucket), at the price of more fsyncs per re-key.
const rekeyChunk = 32

// storeNextKeys records the next keys nw (wrapped by the root) of the
// buckets ids at generations gens, which must have none, in one
// transaction. Relaxed, as the chunks: lost in a crash, the re-keys start
// over with other next keys.
func (s *Shredder) storeNextKeys(ctx context.Context, ids []int, gens []int64, nw []Wrapped) error {
	return s.t.db.Bulk(ctx, storage.BulkOptions{Relaxed: true}, func(tx *storage.Tx) error {
		for j, b := range ids {
			res, err := tx.ExecContext(ctx, `UPDATE buckets SET next_wrapped=?, next_version=? WHERE id=? AND gen=? AND next_wrapped IS NULL`,
				nw[j].Blob, nw[j].Version, b, gens[j])
			if err != nil {
				return fmt.Errorf("keystore: rekey: %w", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("keystore: rekey: bucket changed concurrently") // cannot happen under treeMu
			}
		}
		return nil
	})
}

// RekeyBucket replaces the bucket's key with a fresh one and rewraps the
// bucket's live DEKs under it, so the old bucket key (which may still open a
// forgotten DEK in a backup) exists only wrapped under root versions the next
// epoch destroys. It returns a marker: the forget is shredded once an epoch
// newer than the marker has completed (see EpochAfter).
//
// The work is split so that other writers are never held up for long:
//  1. the new key is committed wrapped by the root store (next_wrapped);
//  2. the subject keys are rewrapped rekeyChunk per transaction, reads
//     meanwhile open either generation (bucketKeys);
//  3. one last transaction rewraps keys created meanwhile and makes the new
//     key the bucket's.
//
// A crash anywhere resumes from the committed state on the next call for
// the bucket (the forget stays not re-keyed until then), and an epoch
// finishes a re-key under way before it rewraps bucket keys.
func (s *Shredder) RekeyBucket(ctx context.Context, b int) (int64, error) {
	unlock, err := s.t.lockTree(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	return s.rekeyLocked(ctx, b)
}

// rekeyLocked is RekeyBucket under the tree lock.
func (s *Shredder) rekeyLocked(ctx context.Context, b int) (int64, error) {
	var oldGen int64
	var oldBlob, nextBlob []byte
	var nextVersion sql.NullInt64
	if err := s.t.db.QueryRowContext(ctx, `SELECT gen, wrapped, next_wrapped, next_version FROM buckets WHERE id=?`, b).
		Scan(&oldGen, &oldBlob, &nextBlob, &nextVersion); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	blobs := [][]byte{oldBlob}
	if nextBlob != nil {
		blobs = append(blobs, nextBlob) // resuming a re-key a crash interrupted
	}
	ks, err := s.t.root.Unwrap(ctx, blobs)
	if err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	old := ks[0]
	defer clear(old)
	var nk []byte
	if nextBlob != nil {
		nk = ks[1]
	} else {
		nk = newKey()
		nw, err := s.t.root.Wrap(ctx, [][]byte{nk})
		if err != nil {
			return 0, fmt.Errorf("keystore: rekey: %w", err)
		}
		if err := s.storeNextKeys(ctx, []int{b}, []int64{oldGen}, nw); err != nil {
			return 0, err
		}
		nextBlob, nextVersion = nw[0].Blob, sql.NullInt64{Int64: int64(nw[0].Version), Valid: true}
	}
	defer clear(nk)
	// Reads from now on may meet keys of either generation.
	s.t.setBucketKey(b, oldGen, old, nk)

	var after []byte // the last sid rewrapped: the chunks walk the bucket in sid order
	for {
		n, last, err := s.rewrapChunk(ctx, b, oldGen, old, nk, after)
		if err != nil {
			return 0, err
		}
		if n < rekeyChunk {
			break
		}
		after = last
		crashpoint.Hit("rekey:chunk")
	}

	// Keys created behind the walk (still under the old generation), then
	// the switch, in one transaction.
	tx, err := s.t.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	defer tx.Rollback()
	var gen int64
	if err := tx.QueryRowContext(ctx, `SELECT gen FROM buckets WHERE id=?`, b).Scan(&gen); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	if gen != oldGen {
		return 0, fmt.Errorf("keystore: rekey: bucket changed concurrently") // cannot happen under treeMu
	}
	if _, _, err := rewrapIn(ctx, tx, b, oldGen, old, nk, nil, -1); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE buckets SET gen=?, root_version=?, wrapped=?, next_wrapped=NULL, next_version=NULL WHERE id=?`,
		oldGen+1, nextVersion.Int64, nextBlob, b)
	if err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, fmt.Errorf("keystore: rekey: %w: the database did not apply bucket %d's new key", ErrReadBack, b)
	}
	var marker int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM epochs`).Scan(&marker); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	s.t.setBucketKey(b, oldGen+1, nk, nil)
	crashpoint.Hit("rekey:committed")
	return marker, nil
}

// rewrapChunk rewraps, in one transaction, up to rekeyChunk live subject
// keys of bucket b still under generation oldGen, with sids after after.
// It returns how many it rewrapped and the last sid.
//
// The chunk's commit does not wait for the disk (storage.BulkOptions
// Relaxed): a crash of the machine may lose it, in order, and the re-key
// then resumes before it; the switch that ends the re-key is durable, and
// makes every chunk before it durable. That saves an fsync per chunk, and
// the write lock is held for the chunk's work alone.
func (s *Shredder) rewrapChunk(ctx context.Context, b int, oldGen int64, old, nk, after []byte) (int, []byte, error) {
	var n int
	var last []byte
	var inner error
	err := s.t.db.Bulk(ctx, storage.BulkOptions{Relaxed: true}, func(tx *storage.Tx) error {
		n, last, inner = rewrapIn(ctx, tx, b, oldGen, old, nk, after, rekeyChunk)
		return inner
	})
	if inner != nil {
		return 0, nil, inner
	}
	if err != nil {
		return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	return n, last, nil
}

// rewrapIn rewraps in tx the live subject keys of bucket b under generation
// oldGen (old) as generation oldGen+1 (nk): those with sids after after (all
// if nil), at most limit of them (all if negative), in sid order.
func rewrapIn(ctx context.Context, tx *storage.Tx, b int, oldGen int64, old, nk, after []byte, limit int) (int, []byte, error) {
	if after == nil {
		after = []byte{} // below every sid (NULL would match none)
	}
	if limit < 0 {
		limit = math.MaxInt32 // every engine takes a large LIMIT; not all take -1
	}
	rows, err := tx.QueryContext(ctx, `SELECT sid, gen, wrapped FROM subjects
		WHERE bucket=? AND sid > ? AND wrapped IS NOT NULL AND bucket_gen=? ORDER BY bucket, sid LIMIT ?`, b, after, oldGen, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	type rw struct {
		sid  []byte
		blob []byte
	}
	var out []rw
	for rows.Next() {
		var sidb, blob []byte
		var g uint32
		if err := rows.Scan(&sidb, &g, &blob); err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
		}
		var sid envelope.SID
		copy(sid[:], sidb)
		dek, err := unwrapDEK(old, blob, dekAAD(sid, g, b, oldGen))
		if err != nil {
			rows.Close()
			return 0, nil, fmt.Errorf("keystore: rekey: subject key: %w", err)
		}
		out = append(out, rw{sidb, wrapDEK(nk, dek, dekAAD(sid, g, b, oldGen+1))})
		clear(dek)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	for _, r := range out {
		if _, err := tx.ExecContext(ctx, `UPDATE subjects SET wrapped=?, bucket_gen=? WHERE bucket=? AND sid=?`, r.blob, oldGen+1, b, r.sid); err != nil {
			return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
		}
	}
	if len(out) == 0 {
		return 0, after, nil
	}
	return len(out), out[len(out)-1].sid, nil
}
