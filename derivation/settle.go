package derivation

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd/storage"
)

// Staged lineage. A registration writes its artifact's lineage and parent
// rows into lineage_staged and parents_staged, keyed by artifact id: its
// ids are time-ordered, so a group commit appends to a few pages. The
// tables keyed by subject (lineage) and by parent (artifact_parents'
// index) would take one page per row, scattered over the table, which
// bounded group commits at a fraction of the disk's sequential speed.
// Settle moves the staged rows there later, many at once, in key order.
//
// Readers by artifact (LineagesOf, Parents, LineageOf) read both tables
// in one statement. Readers by subject or by parent (Children, and package
// registry's joins for package erasure) either read the view lineage_all
// (both tables: a forget's verification, the holders' purge work and acks,
// so that a forget's answer never waits for a settle) or call Settle
// first (the preview, the lists, the attestation): every
// registration committed before that call is then in the tables they read.
// A registration committed after a forget's barrier cannot carry the
// forgotten subject, so a reader after the barrier sees the whole lineage
// of the forget.

// settleChunk bounds the artifacts Settle moves in one transaction, so that
// the write lock is held about as long as by a group commit: at scale each
// row may read a page from the disk. The chunks commit relaxed
// (storage.BulkOptions): a chunk lost in a crash of the machine leaves its
// rows staged, to be moved again.
const settleChunk = 256

// Settle moves every staged lineage and parent row into lineage and
// artifact_parents, a chunk of whole artifacts per transaction, and returns
// once none that was committed before the call is left. It is cheap when
// nothing is staged: one read. Rows not yet in the staging tables (the
// registration WAL's tail, package registry) are not its business.
func (s *Graph) Settle(ctx context.Context) error {
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	// The newest artifact staged now bounds the work: registrations
	// committed later wait for the next call.
	var limit []byte
	switch err := s.db.QueryRowContext(ctx, `SELECT artifact FROM lineage_staged ORDER BY artifact DESC LIMIT 1`).Scan(&limit); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("derivation: settle: %w", err)
	}
	for {
		more, err := s.settleChunk(ctx, limit)
		if err != nil || !more {
			return err
		}
	}
}

// settleChunk moves the staged rows of the oldest settleChunk artifacts up
// to limit in one transaction, and reports whether rows up to limit are
// left. An artifact's rows move together.
func (s *Graph) settleChunk(ctx context.Context, limit []byte) (bool, error) {
	var more bool
	var inner error
	o := storage.BulkOptions{Relaxed: true}
	if s.db.Shared() {
		// Beside the registrations of every node (settleIn's moves are
		// one statement each); a forget still waits for it, and it for
		// the forget.
		o.Tx = storage.TxOptions{Shards: storage.AllShards()}
	}
	err := s.db.Bulk(ctx, o, func(tx *storage.Tx) error {
		more, inner = settleIn(ctx, tx, limit, s.db.Shared())
		return inner
	})
	if inner != nil {
		return false, inner
	}
	if err != nil {
		return false, fmt.Errorf("derivation: settle: %w", err)
	}
	return more, nil
}

// settleIn is settleChunk's transaction. shared says that other writers
// run beside it (PostgreSQL: registrations, and other nodes' settles).
func settleIn(ctx context.Context, tx *storage.Tx, limit []byte, shared bool) (bool, error) {
	// The upper bound of the chunk: the settleChunk-th artifact, or the
	// last when fewer are staged. Alone (SQLite), the statements below see
	// the same staged rows. Beside other writers, each statement has a
	// snapshot of its own: a registration may commit rows under the bound
	// between two of them, so each table's rows move in one statement that
	// deletes them and inserts what it deleted (a row another node's
	// settle deletes first is skipped, after it commits).
	var bound []byte
	err := tx.QueryRowContext(ctx, `SELECT artifact FROM (SELECT DISTINCT artifact FROM lineage_staged WHERE artifact <= ? ORDER BY artifact LIMIT ?) c
		ORDER BY artifact DESC LIMIT 1`, limit, settleChunk).Scan(&bound)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("derivation: settle: %w", err)
	}
	stmts := []string{
		`INSERT INTO lineage(sid, artifact, gen, direct) SELECT sid, artifact, gen, direct FROM lineage_staged WHERE artifact <= ? ORDER BY sid, artifact`,
		`DELETE FROM lineage_staged WHERE artifact <= ?`,
		`INSERT INTO artifact_parents(artifact, parent) SELECT artifact, parent FROM parents_staged WHERE artifact <= ? ORDER BY artifact, parent`,
		`DELETE FROM parents_staged WHERE artifact <= ?`,
	}
	if shared {
		stmts = []string{
			`WITH moved AS (DELETE FROM lineage_staged WHERE artifact <= ? RETURNING sid, artifact, gen, direct)
				INSERT INTO lineage(sid, artifact, gen, direct) SELECT sid, artifact, gen, direct FROM moved ORDER BY sid, artifact`,
			`WITH moved AS (DELETE FROM parents_staged WHERE artifact <= ? RETURNING artifact, parent)
				INSERT INTO artifact_parents(artifact, parent) SELECT artifact, parent FROM moved ORDER BY artifact, parent`,
		}
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q, bound); err != nil {
			return false, fmt.Errorf("derivation: settle: %w", err)
		}
	}
	var more int
	switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM lineage_staged WHERE artifact <= ? LIMIT 1`, limit).Scan(&more); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, fmt.Errorf("derivation: settle: %w", err)
	}
	return more == 1, nil
}
