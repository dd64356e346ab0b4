package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/storage"
)

// RunEpoch runs an epoch, or resumes the one a crash interrupted. Every step
// is durable before the next starts, and the old root versions are destroyed
// only after every bucket key is committed under the new one, so a crash at
// any point loses no live key.
func (s *Shredder) RunEpoch(ctx context.Context) (_ shredd.Epoch, err error) {
	defer s.t.stats.observeEpoch(time.Now(), &err) // Stats.Epochs
	unlock, err := s.t.lockTree(ctx)
	if err != nil {
		return shredd.Epoch{}, err
	}
	defer unlock()
	e, err := s.runningEpoch(ctx)
	if err != nil {
		return shredd.Epoch{}, err
	}
	resumed := e != nil
	if e == nil {
		v, err := s.t.root.Versions(ctx)
		if err != nil {
			return shredd.Epoch{}, fmt.Errorf("keystore: epoch: %w", err)
		}
		id, err := s.insertEpoch(ctx, v.Latest)
		if err != nil {
			return shredd.Epoch{}, fmt.Errorf("keystore: epoch: %w", err)
		}
		e = &shredd.Epoch{ID: id, State: "running", StartedAt: s.t.now(), FromVersion: v.Latest}
		crashpoint.Hit("epoch:started")
	}
	if e.ToVersion == 0 {
		v, err := s.t.root.Versions(ctx)
		if err != nil {
			return shredd.Epoch{}, fmt.Errorf("keystore: epoch: %w", err)
		}
		to := v.Latest
		if to <= e.FromVersion && resumed && s.t.root.Kind() != "local" {
			// An epoch that failed around its rotation, on a replicated
			// root store (Vault): a rotation the old active node committed
			// can show on the newly elected one only once it applied its
			// log, so ask again after a pause before rotating a second time.
			if v, err = s.settledVersions(ctx); err != nil {
				return shredd.Epoch{}, fmt.Errorf("keystore: epoch: %w", err)
			}
			to = v.Latest
		}
		if to <= e.FromVersion { // not rotated yet (a crash may have come after the rotate: then reuse it)
			if to, err = s.t.root.Rotate(ctx); err != nil {
				return shredd.Epoch{}, fmt.Errorf("keystore: epoch: rotate: %w", err)
			}
			crashpoint.Hit("epoch:rotated")
		}
		if _, err := s.t.db.ExecContext(ctx, `UPDATE epochs SET to_version=? WHERE id=?`, to, e.ID); err != nil {
			return shredd.Epoch{}, fmt.Errorf("keystore: epoch: %w", err)
		}
		e.ToVersion = to
	}
	// A re-key a crash interrupted holds its next key under an old root
	// version: finish it first, so that the rewrap below covers every key.
	if err := s.finishRekeys(ctx); err != nil {
		return shredd.Epoch{}, err
	}
	if err := s.rewrapBuckets(ctx, e.ToVersion); err != nil {
		return shredd.Epoch{}, err
	}
	crashpoint.Hit("epoch:rewrapped")
	retired, err := s.t.root.Trim(ctx, e.ToVersion)
	if err != nil {
		return shredd.Epoch{}, fmt.Errorf("keystore: epoch: trim: %w", err)
	}
	if retired == nil {
		// Resumed after a trim that already ran: record what the epoch retired.
		for v := e.FromVersion; v < e.ToVersion; v++ {
			retired = append(retired, v)
		}
	}
	crashpoint.Hit("epoch:trimmed")
	// The rows of the forgotten keys must be gone from the disk, not only
	// from the tables (SQLite: the WAL frames that held them).
	if err := s.t.db.Scrub(ctx); err != nil {
		return shredd.Epoch{}, err
	}
	var rs []string
	for _, v := range retired {
		rs = append(rs, strconv.Itoa(v))
	}
	e.FinishedAt = s.t.now()
	e.State = "done"
	e.Retired = retired
	if err := s.finishEpoch(ctx, e, strings.Join(rs, ",")); err != nil {
		return shredd.Epoch{}, err
	}
	s.t.dropBucketKeys() // bucket keys are unchanged, but drop them so that unwraps prove the new root version
	crashpoint.Hit("epoch:done")
	return *e, nil
}

// resumePause is how long a resumed epoch waits before it reads a
// replicated root store's versions again (settledVersions).
const resumePause = 2 * time.Second

// settledVersions reads the root store's versions after resumePause.
func (s *Shredder) settledVersions(ctx context.Context) (Versions, error) {
	select {
	case <-time.After(resumePause):
	case <-ctx.Done():
		return Versions{}, ctx.Err()
	}
	return s.t.root.Versions(ctx)
}

// finishEpoch marks the epoch done and logs it, in one transaction.
func (s *Shredder) finishEpoch(ctx context.Context, e *shredd.Epoch, retired string) error {
	tx, err := s.t.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keystore: epoch: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE epochs SET state='done', finished_at=?, retired=? WHERE id=?`,
		e.FinishedAt.UnixNano(), retired, e.ID); err != nil {
		return fmt.Errorf("keystore: epoch: %w", err)
	}
	if s.t.journal != nil {
		if err := s.t.journal.EpochCompleted(ctx, tx, attest.EpochEvent{Epoch: e.ID, RootStore: s.t.root.Kind(),
			FromVersion: e.FromVersion, ToVersion: e.ToVersion, Retired: e.Retired}); err != nil {
			return fmt.Errorf("keystore: epoch: log: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keystore: epoch: %w", err)
	}
	if s.t.journal != nil {
		// The epoch_completed entry is in the log, the cached bucket
		// keys not dropped yet.
		crashpoint.Hit("log:appended")
	}
	return nil
}

// rewrapBuckets moves every bucket key wrapped under a version below to onto
// the latest root version, a batch per transaction.
func (s *Shredder) rewrapBuckets(ctx context.Context, to int) error {
	for {
		rows, err := s.t.db.QueryContext(ctx, `SELECT id, wrapped FROM buckets WHERE root_version < ? ORDER BY id LIMIT ?`, to, batchSize*4)
		if err != nil {
			return fmt.Errorf("keystore: epoch: %w", err)
		}
		var ids []int64
		var blobs [][]byte
		for rows.Next() {
			var id int64
			var b []byte
			if err := rows.Scan(&id, &b); err != nil {
				rows.Close()
				return fmt.Errorf("keystore: epoch: %w", err)
			}
			ids = append(ids, id)
			blobs = append(blobs, b)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("keystore: epoch: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		var ws []Wrapped
		for i := 0; i < len(blobs); i += batchSize {
			w, err := s.t.root.Rewrap(ctx, blobs[i:min(i+batchSize, len(blobs))])
			if err != nil {
				return fmt.Errorf("keystore: epoch: rewrap: %w", err)
			}
			ws = append(ws, w...)
		}
		tx, err := s.t.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("keystore: epoch: %w", err)
		}
		for i, w := range ws {
			if w.Version < to {
				tx.Rollback()
				return fmt.Errorf("keystore: epoch: rewrap gave version %d below %d", w.Version, to)
			}
			res, err := tx.ExecContext(ctx, `UPDATE buckets SET root_version=?, wrapped=? WHERE id=?`, w.Version, w.Blob, ids[i])
			if err != nil {
				tx.Rollback()
				return fmt.Errorf("keystore: epoch: %w", err)
			}
			// Read back: a database that skips the update (a planted
			// trigger) would otherwise send this loop round for ever.
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				tx.Rollback()
				return fmt.Errorf("keystore: epoch: %w: the database did not apply the re-wrap of bucket %d's key", ErrReadBack, ids[i])
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("keystore: epoch: %w", err)
		}
	}
}

// finishRekeys completes the bucket re-keys under way (after a crash).
// Called under the tree lock.
func (s *Shredder) finishRekeys(ctx context.Context) error {
	ids, err := storage.Column[int](ctx, s.t.db, `SELECT id FROM buckets WHERE next_wrapped IS NOT NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("keystore: epoch: %w", err)
	}
	for _, b := range ids {
		if _, err := s.rekeyLocked(ctx, b, nil); err != nil {
			return fmt.Errorf("keystore: epoch: %w", err)
		}
	}
	return nil
}

func (s *Shredder) runningEpoch(ctx context.Context) (*shredd.Epoch, error) {
	e, err := scanEpoch(s.t.db.QueryRowContext(ctx, epochCols+` WHERE state='running' ORDER BY id LIMIT 1`))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

// Interrupted reports whether an epoch was left running (by a crash).
func (s *Shredder) Interrupted(ctx context.Context) (bool, error) {
	e, err := s.runningEpoch(ctx)
	return e != nil, err
}

// EpochAfter returns the first completed epoch with an id above marker, or
// ErrNotFound when none has completed yet.
func (s *Shredder) EpochAfter(ctx context.Context, marker int64) (shredd.Epoch, error) {
	e, err := scanEpoch(s.t.db.QueryRowContext(ctx, epochCols+` WHERE state='done' AND id > ? ORDER BY id LIMIT 1`, marker))
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Epoch{}, fmt.Errorf("keystore: epoch after %d: %w", marker, ErrNotFound)
	}
	if err != nil {
		return shredd.Epoch{}, err
	}
	return *e, nil
}

// LastDoneEpoch returns the id of the most recent completed epoch, 0
// before the first: a forget re-keyed with a marker below it is shredded
// (EpochAfter names the epoch).
func (s *Shredder) LastDoneEpoch(ctx context.Context) (int64, error) {
	var id int64
	if err := s.t.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM epochs WHERE state='done'`).Scan(&id); err != nil {
		return 0, fmt.Errorf("keystore: last epoch: %w", err)
	}
	return id, nil
}

// LastEpoch returns the most recent epoch, or ErrNotFound before the first.
func (s *Shredder) LastEpoch(ctx context.Context) (shredd.Epoch, error) {
	e, err := scanEpoch(s.t.db.QueryRowContext(ctx, epochCols+` ORDER BY id DESC LIMIT 1`))
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Epoch{}, fmt.Errorf("keystore: last epoch: %w", ErrNotFound)
	}
	if err != nil {
		return shredd.Epoch{}, err
	}
	return *e, nil
}

const epochCols = `SELECT id, state, started_at, finished_at, from_version, to_version, retired FROM epochs`

func scanEpoch(r *sql.Row) (*shredd.Epoch, error) {
	var e shredd.Epoch
	var started int64
	var finished, to sql.NullInt64
	var retired sql.NullString
	if err := r.Scan(&e.ID, &e.State, &started, &finished, &e.FromVersion, &to, &retired); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, fmt.Errorf("keystore: epoch: %w", err)
	}
	e.StartedAt = time.Unix(0, started)
	if finished.Valid {
		e.FinishedAt = time.Unix(0, finished.Int64)
	}
	e.ToVersion = int(to.Int64)
	if retired.String != "" {
		for _, f := range strings.Split(retired.String, ",") {
			v, _ := strconv.Atoi(f)
			e.Retired = append(e.Retired, v)
		}
	}
	return &e, nil
}

// EpochByID returns one epoch, or ErrNotFound.
func (s *Shredder) EpochByID(ctx context.Context, id int64) (shredd.Epoch, error) {
	e, err := scanEpoch(s.t.db.QueryRowContext(ctx, epochCols+` WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Epoch{}, fmt.Errorf("keystore: epoch %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return shredd.Epoch{}, err
	}
	return *e, nil
}

// insertEpoch records a running epoch from root version from and returns
// its id. The insert runs in a write transaction: a query that writes
// outside one would not queue behind the database's write lock.
func (s *Shredder) insertEpoch(ctx context.Context, from int) (int64, error) {
	tx, err := s.t.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO epochs(state, started_at, from_version) VALUES ('running', ?, ?) RETURNING id`,
		s.t.now().UnixNano(), from).Scan(&id); err != nil {
		return 0, err
	}
	return id, tx.Commit()
}
