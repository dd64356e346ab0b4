package erasure

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
	"github.com/shredd/shredd/storage"
)

// The forget ledger seen from the forget workflow: the lines of committed
// forgets read from the database and appended (package ledger holds the
// format), and the checks of a ledger against the database.

// ledgerReserve reserves the ledger's room for one forget's line before
// the forget commits (Ledger.reserve); the returned func releases it.
func (s *Eraser) ledgerReserve() (func(), error) {
	l := s.opts.Ledger
	if l == nil {
		return func() {}, nil
	}
	if err := l.Reserve(); err != nil {
		return nil, fmt.Errorf("erasure: forget: %w", err)
	}
	return l.Release, nil
}

// ledgerAppend records committed forgets in the ledger, when the service
// has one; it returns once they are durable (an fsync shared with the
// forgets appended at the same time).
func (s *Eraser) ledgerAppend(ctx context.Context, ids ...shredd.ID) error {
	return appendLedger(ctx, s, ids, true)
}

// appendLedger is ledgerAppend; with keep, the lines are also kept as a
// forget record with the root store, when it keeps them. A record that
// could not be written does not fail the forget (the root store may be
// down while forgets still commit): it stays pending, and the background
// work writes it again.
func appendLedger(ctx context.Context, s *Eraser, ids []shredd.ID, keep bool) error {
	l := s.opts.Ledger
	if l == nil {
		return nil
	}
	ids = slices.DeleteFunc(slices.Clone(ids), l.Has)
	if len(ids) == 0 {
		return nil
	}
	lines, err := s.ledgerLines(ctx, ids)
	if err != nil {
		return err
	}
	if err := l.Append(lines); err != nil {
		return fmt.Errorf("erasure: forget: %w", err)
	}
	if keep {
		_ = s.records.keep(ctx, lines) // pending on failure: Run retries and warns
	}
	return nil
}

// ledgerRows reads the ledger lines' columns of forgets ids, in one
// statement, by id (the forget, root version and log size left to fill).
func ledgerRows(ctx context.Context, db *storage.DB, ids []shredd.ID) (map[shredd.ID]ledger.Line, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id[:]
	}
	rows, err := db.QueryContext(ctx, `SELECT id, sid, gen, requested_at, committed_at, deadline, commitment FROM forgets
		WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	defer rows.Close()
	out := make(map[shredd.ID]ledger.Line, len(ids))
	for rows.Next() {
		var idb, sid []byte
		var requested, deadline int64
		var committed, gen sql.NullInt64
		var commitment sql.NullString
		if err := rows.Scan(&idb, &sid, &gen, &requested, &committed, &deadline, &commitment); err != nil {
			return nil, fmt.Errorf("erasure: forget ledger: %w", err)
		}
		var id shredd.ID
		copy(id[:], idb)
		out[id] = ledger.Line{SID: hex.EncodeToString(sid), Gen: uint32(gen.Int64),
			RequestedAt: requested, CommittedAt: committed.Int64, Deadline: deadline, Commitment: commitment.String}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	return out, nil
}

// ledgerLines reads the lines of committed forgets from the database.
func (s *Eraser) ledgerLines(ctx context.Context, ids []shredd.ID) ([]ledger.Line, error) {
	// The newest root version the database's bucket keys were wrapped under
	// when the forgets committed: a backup taken before them needs that
	// version or an older one (read from the database, not the root store:
	// a forget must not wait for Vault).
	rootVersion, err := s.keys.BucketRootVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	// The log's size now: checkpoints up to it may have been handed out, so
	// a database whose log is shorter was restored from an older copy.
	var logSize int64
	if j := s.opts.Journal; j != nil {
		if logSize, err = j.Log().Size(ctx); err != nil {
			return nil, fmt.Errorf("erasure: forget ledger: %w", err)
		}
	}
	lines := make([]ledger.Line, 0, len(ids))
	for chunk := range slices.Chunk(ids, 500) { // a group's lines in one read (a group holds at most 64)
		rows, err := ledgerRows(ctx, s.db, chunk)
		if err != nil {
			return nil, err
		}
		for _, id := range chunk {
			r, ok := rows[id]
			if !ok {
				return nil, fmt.Errorf("erasure: forget ledger: forget %s: %w", id, sql.ErrNoRows)
			}
			r.Forget, r.RootVersion, r.LogSize = id.String(), rootVersion, logSize
			lines = append(lines, r)
		}
	}
	return lines, nil
}

// committedForgets reads the database's forgets past requested, and the
// ids merged into them (aliases): a ledger line or forget record naming
// one is present, never committed again nor missing from the ledger.
func committedForgets(ctx context.Context, db *storage.DB) (map[shredd.ID]ledger.Known, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, state, coalesce(committed_at, 0) FROM forgets WHERE state<>?`, shredd.StateRequested)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	defer rows.Close()
	out := map[shredd.ID]ledger.Known{}
	for rows.Next() {
		var b []byte
		var f ledger.Known
		if err := rows.Scan(&b, &f.State, &f.Committed); err != nil {
			return nil, fmt.Errorf("erasure: forget ledger: %w", err)
		}
		var id shredd.ID
		copy(id[:], b)
		out[id] = f
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	return out, aliases(ctx, db, out)
}

// CheckLedger checks the ledger file at path without changing anything
// (shredd ledger check, with the server stopped): the chain, the head kept
// with the root (kept, nil for none; keptErr when it could not be read),
// and which forgets of a damaged tail the database db holds. records: the
// root store keeps forget records instead of a head (Vault).
func CheckLedger(ctx context.Context, db *storage.DB, path string, key []byte, kept *ledger.Head, keptErr error, records bool) (ledger.Check, error) {
	b, err := datadir.Read(path, datadir.Secret, 1<<40)
	if err != nil {
		return ledger.Check{Records: records}, fmt.Errorf("%w: %v", shredd.ErrLedger, err)
	}
	sc, err := ledger.ScanFile(path, key, b)
	if err != nil {
		return ledger.Check{Records: records}, err
	}
	if sc.V1 != nil {
		return ledger.Check{Path: path, Lines: len(sc.V1), Records: records}, nil // converted at the next start
	}
	c, _, err := assess(ctx, db, path, &sc, kept, keptErr, !records)
	c.Records = records
	return c, err
}

// assess checks the scan sc of the ledger at path against the head kept
// with the root (kept, keptErr) and the database's committed forgets,
// which it returns too. headed: the root keeps the ledger's head (not
// forget records), so a head the database pins and the root lacks is
// HeadGone.
func assess(ctx context.Context, db *storage.DB, path string, sc *ledger.Scan, kept *ledger.Head, keptErr error, headed bool) (ledger.Check, map[shredd.ID]ledger.Known, error) {
	forgets, err := committedForgets(ctx, db)
	if err != nil {
		return ledger.Check{}, nil, err
	}
	c := ledger.Assess(path, sc, kept, keptErr, forgets)
	if headed {
		if c.HeadGone, err = headGone(ctx, db, kept, keptErr); err != nil {
			return ledger.Check{}, nil, err
		}
	}
	return c, forgets, nil
}

// PrecheckLedger is the start's check of the ledger at path before it
// writes anything (phase one): its directory; a root store older than the
// ledger's compaction (the root still holds versions an epoch destroyed
// while dropping ledger lines: refused whatever acceptLoss says, since it
// would open what those forgets destroyed); then the file (missing:
// empty), its chain and the head kept with the local root, against the
// forgets of db. A ledger whose repair would lose a forget the database
// lacks is refused, as ReconcileLedger would refuse it later, unless
// acceptLoss; a root store that keeps forget records instead of the head
// (Vault) is left to ReconcileLedger.
func PrecheckLedger(ctx context.Context, db *storage.DB, path string, key []byte, root keystore.RootStore, acceptLoss bool) error {
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory that holds the ledger %s: nothing was changed; create it (mode 0700), or point --forget-ledger at the ledger's file", shredd.ErrLedger, filepath.Dir(path), path)
	}
	b, err := datadir.Read(path, datadir.Secret, 1<<40)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b = nil
	case err != nil:
		return nil // opening it refuses it, with the fix
	}
	sc, err := ledger.ScanFile(path, key, b)
	if err != nil || sc.V1 != nil {
		return nil // opening it refuses or converts it
	}
	if c := sc.Header; c != nil && c.Compacted != nil && c.Compacted.Below > 0 {
		v, err := root.Versions(ctx)
		if err != nil {
			return err
		}
		if below := c.Compacted.Below; v.MinAvailable < below {
			return fmt.Errorf("%w: the root file holds root version %d, but %s dropped lines of forgets whose keys an epoch destroyed below root version %d: "+
				"the root file is older than the ledger (put back from a copy taken before that epoch) and would open what those forgets destroyed. Nothing was changed. "+
				"%s", shredd.ErrLedger, v.MinAvailable, path, below, rootFix(root))
		}
	}
	// The head kept with the root: the local root file's (a Vault root
	// keeps forget records instead, which ReconcileLedger reads); a repair
	// that accepts the loss checks nothing more here.
	if root.Kind() != "local" || acceptLoss {
		return nil
	}
	kept, keptErr := keptHeadOf(ctx, root)
	if errors.Is(keptErr, keystore.ErrCorrupt) {
		return corruptHead(keptErr)
	}
	check, _, err := assess(ctx, db, path, &sc, kept, keptErr, true)
	if err != nil {
		return err
	}
	if check.Damage() && check.Loss() {
		return notWhole(path, check)
	}
	return nil
}

// notWhole is the refusal of a ledger whose repair would lose a forget
// the database lacks.
func notWhole(path string, check ledger.Check) error {
	return fmt.Errorf("%w: %s is not whole: %s. Nothing was changed. Run `shredd ledger check` (server stopped) to see what is damaged and what would be lost, then restore the ledger file, or accept the loss with `shredd ledger repair --accept-loss` (docs/operations.md, \"The forget ledger\")",
		shredd.ErrLedger, path, check.Summary())
}

// rootFix is what to do about a root store older than the ledger.
func rootFix(root keystore.RootStore) string {
	if root.Kind() == "local" {
		return "Put back the live root.key (never one from a backup)"
	}
	return "The root store was restored from a snapshot taken before that epoch: point shredd at the live one (--vault-addr, --vault-transit-mount, --vault-key)"
}

// HeadStream is the stream under which the forget ledger's head is kept
// with the root (ledger.KeepHead): in a local root file, where v1 files
// kept it in a field of their own (keystore/local.LegacyHeadStream).
const HeadStream = "forget-ledger"

// keptHeadOf reads the ledger's head kept with root: nil and no error
// when none was kept. A head that is there and does not parse is a
// corrupt root file: it wraps keystore.ErrCorrupt (corruptHead), and the
// start is refused rather than checked without it.
func keptHeadOf(ctx context.Context, root keystore.RootStore) (*ledger.Head, error) {
	var h ledger.Head
	found, err := ledger.ReadHead(ctx, root, HeadStream, &h)
	if err != nil || !found {
		return nil, err
	}
	return &h, nil
}

// headPin is the database's pin (storage.DB.PinSecrets) that says the
// forget ledger's head is kept with the root (a local root file): a root
// that holds none then lost it, and is not a data directory whose head
// was never kept yet.
const headPin = "ledger-head"

// headGone reports whether db pins a kept head (headPin) and the root
// holds none (kept nil, read without error).
func headGone(ctx context.Context, db *storage.DB, kept *ledger.Head, keptErr error) (bool, error) {
	if kept != nil || keptErr != nil {
		return false, nil
	}
	pins, err := db.SecretPins(ctx)
	if err != nil {
		return false, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	_, ok := pins[headPin]
	return ok, nil
}

// corruptHead is the refusal of a start whose root keeps a forget
// ledger head that does not parse: checked without it, a ledger cut back
// would pass.
func corruptHead(err error) error {
	return fmt.Errorf("%w: %w; nothing was changed: the root file was edited or damaged. Put back the live root.key (never one from a backup), or see docs/operations.md, \"The forget ledger\"", shredd.ErrLedger, err)
}

// nullString is s, or NULL when s is empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
