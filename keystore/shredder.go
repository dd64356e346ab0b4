package keystore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"

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
// rewraps: the lock it holds (the write lock on SQLite, the bucket's shard
// on PostgreSQL) is free between chunks, so a forget's commit waits for one
// chunk, not for the whole bucket (docs/performance-archive.md). The
// subjects of a bucket are adjacent in the table, so a chunk rewrites a
// page or two. Measured at a million subjects (about 244 keys per bucket),
// chunks of 32 gave forgets a lower p99 than chunks of 256 (one chunk per
// bucket), at the price of more fsyncs per re-key.
const rekeyChunk = 32

// storeNextKeys records the next keys nw (wrapped by the root) of the
// buckets ids at generations gens, which must have none, in one
// transaction of one statement (seven parameters a bucket: see
// maxParams). Relaxed, as the chunks: lost in a crash, the re-keys start
// over with other next keys.
func (s *Shredder) storeNextKeys(ctx context.Context, ids []int, gens []int64, nw []Wrapped) error {
	var keys, versions, olds []any
	group := make([]rekeyRow, len(ids))
	for j, b := range ids {
		keys = append(keys, b, nw[j].Blob)
		versions = append(versions, b, nw[j].Version)
		olds = append(olds, b, gens[j])
		group[j].id = b
	}
	n := len(ids)
	args := slices.Concat(keys, versions, groupIDs(group), olds)
	q := `UPDATE buckets SET next_wrapped=CASE id` + whens(n, false) + ` ELSE next_wrapped END,
		next_version=CASE id` + whens(n, true) + ` ELSE next_version END
		WHERE id IN (` + marks(n) + `) AND next_wrapped IS NULL AND gen=CASE id` + whens(n, true) + ` END RETURNING id`
	return s.t.db.Bulk(ctx, storage.BulkOptions{Relaxed: true, Tx: s.t.bucketShards(ids...)}, func(tx *storage.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("keystore: rekey: %w", err)
		}
		if b, err := missingBucket(rows, group); err != nil || b >= 0 {
			if err == nil {
				err = fmt.Errorf("bucket %d changed concurrently", b) // cannot happen under treeMu
			}
			return fmt.Errorf("keystore: rekey: %w", err)
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
	return s.rekeyLocked(ctx, b, nil)
}

// rekeyLocked is RekeyBucket under the tree lock; then, if not nil, runs
// in its switch (RekeyBuckets).
func (s *Shredder) rekeyLocked(ctx context.Context, b int, then Switched) (int64, error) {
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
	// the switch, in one transaction: a group of one bucket.
	r := rekeyRow{id: b, gen: oldGen, next: nextBlob, nextVersion: nextVersion}
	marker, err := s.switchGroup(ctx, []rekeyRow{r}, [][]byte{old}, [][]byte{nk}, then)
	if err != nil {
		return 0, err
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
// the chunk's lock is held for its work alone. On PostgreSQL every
// transaction of a re-key declares the bucket's shard, alone
// (Tree.bucketShards): forgets and registrations of other shards commit
// beside it.
func (s *Shredder) rewrapChunk(ctx context.Context, b int, oldGen int64, old, nk, after []byte) (int, []byte, error) {
	var n int
	var last []byte
	var inner error
	err := s.t.db.Bulk(ctx, storage.BulkOptions{Relaxed: true, Tx: s.t.bucketShards(b)}, func(tx *storage.Tx) error {
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
// if nil), at most limit of them (all if negative), in sid order. It reads
// the bucket's keys in one statement and writes them in one per
// rewrapStmtKeys (one for a chunk of rekeyChunk).
func rewrapIn(ctx context.Context, tx *storage.Tx, b int, oldGen int64, old, nk, after []byte, limit int) (int, []byte, error) {
	if after == nil {
		after = []byte{} // below every sid (NULL would match none)
	}
	if limit < 0 {
		limit = math.MaxInt32 // every engine takes a large LIMIT; not all take -1
	}
	rows, err := tx.QueryContext(ctx, `SELECT bucket, sid, gen, wrapped FROM subjects
		WHERE bucket=? AND sid > ? AND wrapped IS NOT NULL AND bucket_gen=? ORDER BY bucket, sid LIMIT ?`, b, after, oldGen, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	out, err := rewrapRows(rows, map[int]rekeyKeys{b: {gen: oldGen, old: old, nk: nk}})
	if err != nil {
		return 0, nil, err
	}
	if err := storeRewrapped(ctx, tx, out); err != nil {
		return 0, nil, err
	}
	if len(out) == 0 {
		return 0, after, nil
	}
	return len(out), out[len(out)-1].sid, nil
}

// rewrapGroup rewraps in tx every live subject key of the group's buckets
// still under their generation (olds[i] the key of group[i], nks[i] its
// next key), in bucket then sid order: one read for the whole group, and
// one write per rewrapStmtKeys keys. A group's live keys are about
// rekeyGroupKeys (RekeyBuckets counts them), more only when keys were
// created since: one write, in practice.
func rewrapGroup(ctx context.Context, tx *storage.Tx, group []rekeyRow, olds, nks [][]byte) error {
	keys := make(map[int]rekeyKeys, len(group))
	var gens []any
	for i, r := range group {
		keys[r.id] = rekeyKeys{gen: r.gen, old: olds[i], nk: nks[i]}
		gens = append(gens, r.id, r.gen)
	}
	rows, err := tx.QueryContext(ctx, `SELECT bucket, sid, gen, wrapped FROM subjects
		WHERE bucket IN (`+marks(len(group))+`) AND wrapped IS NOT NULL AND bucket_gen=CASE bucket`+whens(len(group), true)+` END
		ORDER BY bucket, sid`, append(groupIDs(group), gens...)...)
	if err != nil {
		return fmt.Errorf("keystore: rekey: %w", err)
	}
	out, err := rewrapRows(rows, keys)
	if err != nil {
		return err
	}
	return storeRewrapped(ctx, tx, out)
}

// rekeyKeys are a bucket's keys while it is re-keyed: its generation gen's
// (old) and the next one's (nk).
type rekeyKeys struct {
	gen     int64
	old, nk []byte
}

// rewrapped is a subject key rewrapped under its bucket's next key, for
// the bucket's generation gen.
type rewrapped struct {
	bucket    int
	sid, blob []byte
	gen       int64
}

// rewrapRows rewraps the subject keys rows holds (bucket, sid, gen,
// wrapped) under the next keys of their buckets in keys, and closes rows.
func rewrapRows(rows *sql.Rows, keys map[int]rekeyKeys) ([]rewrapped, error) {
	defer rows.Close()
	var out []rewrapped
	for rows.Next() {
		var b int
		var sidb, blob []byte
		var g uint32
		if err := rows.Scan(&b, &sidb, &g, &blob); err != nil {
			return nil, fmt.Errorf("keystore: rekey: %w", err)
		}
		k, ok := keys[b]
		if !ok {
			return nil, fmt.Errorf("keystore: rekey: a subject key of bucket %d, not re-keyed here", b) // the statements select none
		}
		var sid envelope.SID
		copy(sid[:], sidb)
		dek, err := unwrapDEK(k.old, blob, dekAAD(sid, g, b, k.gen))
		if err != nil {
			return nil, fmt.Errorf("keystore: rekey: subject key: %w", err)
		}
		out = append(out, rewrapped{bucket: b, sid: sidb, blob: wrapDEK(k.nk, dek, dekAAD(sid, g, b, k.gen+1)), gen: k.gen + 1})
		clear(dek)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	return out, nil
}

// rewrapStmtKeys bounds the subject keys of one statement of
// storeRewrapped: twice a group's rekeyGroupKeys, so that a group's keys
// take one statement, also with some created since it was counted.
const rewrapStmtKeys = 2 * rekeyGroupKeys

// storeRewrapped writes the rewrapped keys out in tx, one statement per
// rewrapStmtKeys of them.
func storeRewrapped(ctx context.Context, tx *storage.Tx, out []rewrapped) error {
	for i := 0; i < len(out); i += rewrapStmtKeys {
		if err := updateSubjects(ctx, tx, out[i:min(i+rewrapStmtKeys, len(out))]); err != nil {
			return err
		}
	}
	return nil
}

// updateSubjects writes the rewrapped keys ks in tx in one statement, and
// reads back that each row took its key: a row left under the old
// generation would not open once the bucket switched. Its parameters are
// three a key and three a bucket (at most one a key): see maxParams.
func updateSubjects(ctx context.Context, tx *storage.Tx, ks []rewrapped) error {
	var blobs, gens, buckets, sids []any
	seen := map[int]bool{}
	for _, k := range ks {
		blobs = append(blobs, k.sid, k.blob)
		sids = append(sids, k.sid)
		if !seen[k.bucket] {
			seen[k.bucket] = true
			gens = append(gens, k.bucket, k.gen)
			buckets = append(buckets, k.bucket)
		}
	}
	// A row's bucket is a function of its sid (BucketOf): the two lists
	// select exactly the rows of ks, by the table's key (inSubjects).
	rows, err := tx.QueryContext(ctx, `UPDATE subjects SET wrapped=CASE sid`+whens(len(ks), false)+` ELSE wrapped END,
		bucket_gen=CASE bucket`+whens(len(buckets), true)+` ELSE bucket_gen END
		WHERE bucket IN (`+marks(len(buckets))+`) AND sid IN (`+marks(len(sids))+`) RETURNING sid`,
		slices.Concat(blobs, gens, buckets, sids)...)
	if err != nil {
		return fmt.Errorf("keystore: rekey: %w", err)
	}
	if b, err := missingKey(rows, ks); err != nil || b >= 0 {
		if err == nil {
			err = fmt.Errorf("%w: the database did not apply a rewrapped subject key of bucket %d", ErrReadBack, b)
		}
		return fmt.Errorf("keystore: rekey: %w", err)
	}
	return nil
}

// missingKey reads the sids an UPDATE ... RETURNING sid returned (and
// closes rows): it returns the bucket of the first key of ks not among
// them, or -1 when none is.
func missingKey(rows *sql.Rows, ks []rewrapped) (int, error) {
	sids, err := storage.ScanColumn[[]byte](rows)
	if err != nil {
		return 0, err
	}
	got := make(map[string]bool, len(sids))
	for _, sid := range sids {
		got[string(sid)] = true
	}
	for _, k := range ks {
		if !got[string(k.sid)] {
			return k.bucket, nil
		}
	}
	return -1, nil
}
