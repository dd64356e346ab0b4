package keystore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/storage"
)

// rekeyGroupKeys bounds the subject keys one transaction of RekeyBuckets
// rewraps over all its buckets, so that a forget's commit queued behind it
// waits for about as long as behind a few chunks of RekeyBucket.
const rekeyGroupKeys = 8 * rekeyChunk

// maxParams is the most parameters a statement may have on every engine:
// SQLite's limit (32766 since 3.32; PostgreSQL's is 65535). A re-key's
// statements are bounded by its group: at most batchSize/2 buckets a group
// (RekeyBuckets), seven parameters a bucket (storeNextKeys,
// switchBuckets), and at most rewrapStmtKeys subject keys a statement,
// three parameters a key and three a bucket (updateSubjects). The
// constants below do not compile if a bound grows past the limit (a
// negative constant is no uint).
const maxParams = 32766

const (
	_ uint = maxParams - 7*batchSize/2
	_ uint = maxParams - 3*rewrapStmtKeys - 3*rewrapStmtKeys
)

// Switched is what a caller of RekeyBuckets records in the transaction
// that makes the next keys of buckets theirs, with their marker: its
// writes commit with the switch, or neither does. The transaction
// declares the buckets' shards (exclusively), and then writes only rows
// of the buckets' subjects.
type Switched func(ctx context.Context, tx *storage.Tx, buckets []int, marker int64) error

// RekeyBuckets re-keys buckets as RekeyBucket does each, with the same
// markers, but in few transactions: re-keying bucket by bucket, a pass
// behind a stream of forgets queues four times per bucket at the write
// gate and falls behind (docs/design.md §4).
//
// A bucket whose live subject keys are fewer than a chunk is re-keyed in a
// group with others:
//  1. every group bucket's next key, wrapped by the root store in one
//     call, is committed in one transaction (next_wrapped);
//  2. one transaction rewraps the group buckets' subject keys and makes
//     each next key its bucket's.
//
// A crash between the two leaves each bucket as RekeyBucket's step 1
// does: reads open either generation, the next call or an epoch finishes
// the re-key. A larger bucket takes RekeyBucket's resumable path.
//
// The map holds the markers of the buckets re-keyed, also when the error
// is not nil: those stay re-keyed. then, if not nil, runs in each
// transaction that switches buckets (Switched), before it commits.
func (s *Shredder) RekeyBuckets(ctx context.Context, buckets []int, then Switched) (map[int]int64, error) {
	unlock, err := s.t.lockTree(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	buckets = slices.Clone(buckets)
	slices.Sort(buckets)
	buckets = slices.Compact(buckets)
	done := make(map[int]int64, len(buckets))
	for len(buckets) > 0 {
		n := min(len(buckets), batchSize)
		rows, err := s.rekeyRows(ctx, buckets[:n])
		if err != nil {
			return done, err
		}
		buckets = buckets[n:]
		var group []rekeyRow
		keys := 0
		for _, r := range rows {
			if r.live >= rekeyChunk {
				marker, err := s.rekeyLocked(ctx, r.id, then)
				if err != nil {
					return done, err
				}
				done[r.id] = marker
				continue
			}
			if keys+r.live > rekeyGroupKeys || len(group) == batchSize/2 { // two blobs a bucket in one root call
				if err := s.rekeyGroup(ctx, group, done, then); err != nil {
					return done, err
				}
				group, keys = nil, 0
			}
			group = append(group, r)
			keys += r.live
		}
		if err := s.rekeyGroup(ctx, group, done, then); err != nil {
			return done, err
		}
	}
	return done, nil
}

// rekeyRow is a bucket's row as RekeyBuckets reads it, with the number of
// its live subject keys under its generation.
type rekeyRow struct {
	id          int
	gen         int64
	wrapped     []byte
	next        []byte
	nextVersion sql.NullInt64
	live        int
}

// rekeyRows reads the rows of buckets, in id order.
func (s *Shredder) rekeyRows(ctx context.Context, buckets []int) ([]rekeyRow, error) {
	args := make([]any, len(buckets))
	for i, b := range buckets {
		args[i] = b
	}
	q := `SELECT id, gen, wrapped, next_wrapped, next_version,
		(SELECT count(*) FROM subjects WHERE bucket=buckets.id AND wrapped IS NOT NULL AND bucket_gen=buckets.gen)
		FROM buckets WHERE id IN (?` + strings.Repeat(",?", len(buckets)-1) + `) ORDER BY id`
	rows, err := s.t.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	defer rows.Close()
	var out []rekeyRow
	for rows.Next() {
		var r rekeyRow
		if err := rows.Scan(&r.id, &r.gen, &r.wrapped, &r.next, &r.nextVersion, &r.live); err != nil {
			return nil, fmt.Errorf("keystore: rekey: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	if len(out) != len(buckets) {
		return nil, fmt.Errorf("keystore: rekey: %w: %d of %d buckets", ErrNotFound, len(out), len(buckets))
	}
	return out, nil
}

// rekeyGroup re-keys the buckets of group, small ones, in two
// transactions, and records their markers in done.
func (s *Shredder) rekeyGroup(ctx context.Context, group []rekeyRow, done map[int]int64, then Switched) error {
	if len(group) == 0 {
		return nil
	}
	olds, nks, err := s.groupKeys(ctx, group)
	defer func() {
		for i := range olds {
			clear(olds[i])
			clear(nks[i])
		}
	}()
	if err != nil {
		return err
	}
	// Reads from now on may meet keys of either generation.
	for i, r := range group {
		s.t.setBucketKey(r.id, r.gen, olds[i], nks[i])
	}
	marker, err := s.switchGroup(ctx, group, olds, nks, then)
	if err != nil {
		return err
	}
	for i, r := range group {
		s.t.setBucketKey(r.id, r.gen+1, nks[i], nil)
		done[r.id] = marker
	}
	crashpoint.Hit("rekey:committed")
	return nil
}

// groupKeys unwraps the group's bucket keys and next keys, and commits a
// fresh next key for each bucket without one (in group, too), in one
// transaction.
func (s *Shredder) groupKeys(ctx context.Context, group []rekeyRow) (olds, nks [][]byte, err error) {
	var blobs [][]byte
	for _, r := range group {
		blobs = append(blobs, r.wrapped)
		if r.next != nil {
			blobs = append(blobs, r.next) // resuming a re-key a crash interrupted
		}
	}
	ks, err := s.t.root.Unwrap(ctx, blobs)
	if err != nil {
		return nil, nil, fmt.Errorf("keystore: rekey: %w", err)
	}
	olds, nks = make([][]byte, len(group)), make([][]byte, len(group))
	var fresh []int // indexes in group of the buckets that need a next key
	for i, r := range group {
		olds[i], ks = ks[0], ks[1:]
		if r.next != nil {
			nks[i], ks = ks[0], ks[1:]
			continue
		}
		nks[i] = newKey()
		fresh = append(fresh, i)
	}
	if len(fresh) == 0 {
		return olds, nks, nil
	}
	plain := make([][]byte, len(fresh))
	for j, i := range fresh {
		plain[j] = nks[i]
	}
	nw, err := s.t.root.Wrap(ctx, plain)
	if err != nil {
		return olds, nks, fmt.Errorf("keystore: rekey: %w", err)
	}
	ids, gens := make([]int, len(fresh)), make([]int64, len(fresh))
	for j, i := range fresh {
		ids[j], gens[j] = group[i].id, group[i].gen
	}
	if err := s.storeNextKeys(ctx, ids, gens, nw); err != nil {
		return olds, nks, err
	}
	for j, i := range fresh {
		group[i].next = nw[j].Blob
		group[i].nextVersion = sql.NullInt64{Int64: int64(nw[j].Version), Valid: true}
	}
	return olds, nks, nil
}

// switchGroup rewraps, in one durable transaction, every live subject key
// of the group's buckets under their next keys and makes those the
// buckets' keys. It returns the marker. Its statements are a fixed number
// whatever the group's size: one read of the buckets' generations, one of
// their live keys, one update of the keys (per rewrapStmtKeys of them) and
// one of the buckets. RekeyBucket's switch is this for a group of one.
// then, if not nil, runs in the transaction before it commits.
func (s *Shredder) switchGroup(ctx context.Context, group []rekeyRow, olds, nks [][]byte, then Switched) (int64, error) {
	ids := make([]int, len(group))
	for i, r := range group {
		ids[i] = r.id
	}
	tx, err := s.t.db.BeginTouching(ctx, s.t.bucketShards(ids...))
	if err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	defer tx.Rollback()
	if err := checkGroupGens(ctx, tx, group); err != nil {
		return 0, err
	}
	if err := rewrapGroup(ctx, tx, group, olds, nks); err != nil {
		return 0, err
	}
	if err := switchBuckets(ctx, tx, group); err != nil {
		return 0, err
	}
	var marker int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM epochs`).Scan(&marker); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	if then != nil {
		if err := then(ctx, tx, ids, marker); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("keystore: rekey: %w", err)
	}
	return marker, nil
}

// checkGroupGens checks in tx, in one statement, that each bucket of group is
// still at the generation the re-key started from.
func checkGroupGens(ctx context.Context, tx *storage.Tx, group []rekeyRow) error {
	ids := groupIDs(group)
	rows, err := tx.QueryContext(ctx, `SELECT id, gen FROM buckets WHERE id IN (`+marks(len(ids))+`)`, ids...)
	if err != nil {
		return fmt.Errorf("keystore: rekey: %w", err)
	}
	defer rows.Close()
	gens := make(map[int]int64, len(group))
	for rows.Next() {
		var b int
		var g int64
		if err := rows.Scan(&b, &g); err != nil {
			return fmt.Errorf("keystore: rekey: %w", err)
		}
		gens[b] = g
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("keystore: rekey: %w", err)
	}
	for _, r := range group {
		g, ok := gens[r.id]
		if !ok {
			return fmt.Errorf("keystore: rekey: bucket %d: %w", r.id, ErrNotFound)
		}
		if g != r.gen {
			return fmt.Errorf("keystore: rekey: bucket %d changed concurrently", r.id) // cannot happen under treeMu
		}
	}
	return nil
}

// groupIDs returns the ids of group's buckets, as statement arguments.
func groupIDs(group []rekeyRow) []any {
	ids := make([]any, len(group))
	for i, r := range group {
		ids[i] = r.id
	}
	return ids
}

// switchBuckets makes in tx, in one statement, each bucket's next key its
// key, at the next generation, and reads back that every bucket row took
// it. Seven parameters a bucket: see maxParams.
func switchBuckets(ctx context.Context, tx *storage.Tx, group []rekeyRow) error {
	var gens, versions, keys []any
	for _, r := range group {
		gens = append(gens, r.id, r.gen+1)
		versions = append(versions, r.id, r.nextVersion.Int64)
		keys = append(keys, r.id, r.next)
	}
	n := len(group)
	args := slices.Concat(gens, versions, keys, groupIDs(group))
	rows, err := tx.QueryContext(ctx, `UPDATE buckets SET gen=CASE id`+whens(n, true)+` ELSE gen END,
		root_version=CASE id`+whens(n, true)+` ELSE root_version END,
		wrapped=CASE id`+whens(n, false)+` ELSE wrapped END, next_wrapped=NULL, next_version=NULL
		WHERE id IN (`+marks(n)+`) RETURNING id`, args...)
	if err != nil {
		return fmt.Errorf("keystore: rekey: %w", err)
	}
	if b, err := missingBucket(rows, group); err != nil || b >= 0 {
		if err == nil {
			err = fmt.Errorf("%w: the database did not apply bucket %d's new key", ErrReadBack, b)
		}
		return fmt.Errorf("keystore: rekey: %w", err)
	}
	return nil
}

// missingBucket reads the bucket ids an UPDATE ... RETURNING id returned
// (and closes rows): it returns the first bucket of group not among them,
// or -1 when none is.
func missingBucket(rows *sql.Rows, group []rekeyRow) (int, error) {
	ids, err := storage.ScanColumn[int](rows)
	if err != nil {
		return 0, err
	}
	got := make(map[int]bool, len(ids))
	for _, b := range ids {
		got[b] = true
	}
	for _, r := range group {
		if !got[r.id] {
			return r.id, nil
		}
	}
	return -1, nil
}

// whens returns n arms " WHEN ? THEN ?" of a CASE. typed casts each result
// to BIGINT, a type both engines know: PostgreSQL infers text for a CASE
// whose results are all parameters, unless an ELSE of the column gives it
// the column's type (as the BYTEA ones have).
func whens(n int, typed bool) string {
	arm := " WHEN ? THEN ?"
	if typed {
		arm = " WHEN ? THEN CAST(? AS BIGINT)"
	}
	return strings.Repeat(arm, n)
}
