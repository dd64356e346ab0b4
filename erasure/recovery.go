package erasure

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/ledger"
)

// Recovery is the forget workflow's recovery from what a crash, a restore
// or a lost file left behind: it reconciles the database with the forget
// ledger (package ledger's Lines) and the forget records kept with the
// root, commits again the forgets a restored database lacks, keeps the
// ledger's head with the root and compacts the ledger after an epoch. The
// forget itself (forget.go) never calls it; the node does, at start, in
// the background work and at shutdown.
type Recovery struct{ s *Eraser }

// Recovery returns the recovery of s's forgets.
func (s *Eraser) Recovery() Recovery { return Recovery{s} }

// LedgerReport says what ReconcileLedger did.
type LedgerReport struct {
	Reapplied int // forgets of the ledger the database lacked, committed again
	Recorded  int // committed forgets of the database the ledger lacked, appended
	// Repaired, when set, is the check of a ledger that was not whole and
	// was repaired: its damaged tail moved to DamagedFile and rewritten
	// from the database and the tail's authentic lines.
	Repaired    *ledger.Check
	DamagedFile string
	// HeadErr says why the head kept with the root could not be read or
	// written (the ledger was then checked without it).
	HeadErr error
	// LogRewound is set when the database's transparency log (of LogSize
	// entries) is shorter than it was when a forget of the ledger was
	// answered (LedgerLogSize): the database was restored from an older
	// copy, and checkpoints handed out above LogSize do not verify against
	// it.
	LogRewound    bool
	LogSize       int64
	LedgerLogSize int64
	// FromRecords counts the forgets of Reapplied that came from the
	// forget records kept with the root store (the local ledger lacked
	// them: another node answered them, or this node's disk was lost).
	FromRecords int
	// RecordsErr says why the forget records could not be read or written
	// (the root store is down): the background work writes the pending
	// ones once it is back.
	RecordsErr error
}

// ReconcileLedger makes the database and the forget ledger agree before
// serving. It checks the ledger's chain and its head against the head
// kept with the root. A ledger that is not whole (a damaged tail, lines
// missing, replaced) is repaired when nothing is lost: the database holds
// every forget involved (or the damaged line itself is authentic); the
// damaged bytes are kept beside the ledger (DamagedFile) and the tail is
// rewritten. Otherwise the start is refused with ErrLedger, naming shredd
// ledger check and shredd ledger repair, unless LedgerOptions.AcceptLoss.
// Then a forget in the ledger that the database lacks (the database was
// restored from a backup taken before it) is committed again with its id,
// times and commitment, destroying the subject's key in the restored
// database; a committed forget missing from the ledger (a crash between
// the commit and the ledger's fsync) is appended; the head is kept with
// the root. Without a ledger it does nothing.
func (rc Recovery) ReconcileLedger(ctx context.Context) (LedgerReport, error) {
	s := rc.s
	var rep LedgerReport
	l := s.opts.Ledger
	if l == nil {
		return rep, nil
	}
	// This node's work waits; other nodes' only when a forget must be
	// committed again (below): a node joining a cluster whose work lock
	// another node holds for a long re-key pass must not wait for it to
	// find its ledger in step.
	s.workMu.Lock()
	defer s.workMu.Unlock()
	sc, err := l.ReadScan()
	if err != nil {
		return rep, err
	}
	kept, keptErr := s.keptHead(ctx)
	if errors.Is(keptErr, keystore.ErrCorrupt) {
		return rep, corruptHead(keptErr)
	}
	rep.HeadErr = keptErr
	check, db, err := assess(ctx, s.db, l.Path(), &sc, kept, keptErr, s.records == nil)
	if err != nil {
		return rep, err
	}
	if check.Damage() {
		if check.Loss() && !l.AcceptLoss() {
			return rep, notWhole(l.Path(), check)
		}
		rep.Repaired = &check
	}
	if err := s.checkLogSize(ctx, &sc, &rep); err != nil {
		return rep, err
	}
	entries, carried := l.CarryAuthentic(&sc)
	var release func()
	defer func() {
		if release != nil {
			release()
		}
	}()
	if release, rep.Reapplied, err = s.reapplyAll(ctx, entries, db, nil); err != nil {
		return rep, err
	}
	if err := reconcileRecords(ctx, s, db, &rep, &release); err != nil {
		return rep, err
	}
	if rep.Repaired != nil && len(sc.Damaged) > 0 {
		if rep.DamagedFile, err = l.RewriteTail(&sc, carried); err != nil {
			return rep, err
		}
	}
	recorded, err := s.recordMissing(ctx, sc.Header)
	if err != nil {
		return rep, err
	}
	rep.Recorded = recorded
	if err := l.FinishCheck(); err != nil {
		return rep, err
	}
	if h, ok := l.Head(); ok && keptErr == nil {
		if kept != nil && *kept == h {
			l.InStep(kept) // the background work has nothing to keep
			if err := s.pinHead(ctx); err != nil {
				return rep, err
			}
		} else if err := s.keepLedgerHead(ctx, true); err != nil {
			rep.HeadErr = err
		}
	}
	return rep, nil
}

// pinHead pins in the database that the forget ledger's head is kept
// with the root (headPin), once: from then on a root that holds none is
// a refused start (headGone). Only a root that keeps heads (the local
// root file) is pinned; with forget records (Vault) there is no head.
func (s *Eraser) pinHead(ctx context.Context) error {
	if s.records != nil || s.headPinned.Load() || !ledger.Keeps(s.keys.Root()) {
		return nil
	}
	pins, err := s.db.SecretPins(ctx)
	if err != nil {
		return fmt.Errorf("erasure: forget ledger: %w", err)
	}
	if _, ok := pins[headPin]; !ok {
		if err := s.db.PinSecrets(ctx, map[string]string{headPin: HeadStream}, time.Now()); err != nil {
			return fmt.Errorf("erasure: forget ledger: %w", err)
		}
	}
	s.headPinned.Store(true)
	return nil
}

// checkLogSize compares, when there is a journal, the size of the
// database's transparency log with the largest size a line of the ledger
// recorded (rep's LogSize, LedgerLogSize and LogRewound).
func (s *Eraser) checkLogSize(ctx context.Context, sc *ledger.Scan, rep *LedgerReport) error {
	j := s.opts.Journal
	if j == nil {
		return nil
	}
	size, err := j.Log().Size(ctx)
	if err != nil {
		return fmt.Errorf("erasure: forget ledger: %w", err)
	}
	for _, e := range sc.Lines {
		rep.LedgerLogSize = max(rep.LedgerLogSize, e.LogSize)
	}
	rep.LogSize, rep.LogRewound = size, size < rep.LedgerLogSize
	return nil
}

// reapplyAll commits again each forget of entries that the database
// (db) lacks, holding the work lock of every node from the first one on.
// It returns the lock's release (held, when the caller passes the release
// of the lock it holds already; nil when it was not taken; the caller
// releases it once the ledger is in step) and how many forgets were
// re-applied.
func (s *Eraser) reapplyAll(ctx context.Context, entries []ledger.Line, db map[shredd.ID]ledger.Known, held func()) (release func(), reapplied int, err error) {
	release = held
	for _, e := range entries {
		id, _ := shredd.ParseID(e.Forget)
		if _, ok := db[id]; ok {
			continue
		}
		if release == nil {
			if release, err = s.db.Exclusive(ctx, "erasure.work"); err != nil {
				return release, reapplied, fmt.Errorf("erasure: forget ledger: %w: %w", shredd.ErrUnavailable, err)
			}
		}
		var sid envelope.SID
		b, _ := hex.DecodeString(e.SID)
		copy(sid[:], b)
		applied, err := s.reapply(ctx, id, sid, e)
		if err != nil {
			return release, reapplied, err
		}
		if applied {
			reapplied++
		}
	}
	return release, reapplied, nil
}

// recordMissing appends to the ledger, in id order, the committed forgets
// of the database it lacks (but those a compaction of the ledger, header,
// dropped), and returns how many.
func (s *Eraser) recordMissing(ctx context.Context, header *ledger.Header) (int, error) {
	l := s.opts.Ledger
	db, err := committedForgets(ctx, s.db)
	if err != nil {
		return 0, err
	}
	var missing []shredd.ID
	for id, f := range db {
		if !f.Alias && !l.Has(id) && !ledger.Compacted(header, f) {
			missing = append(missing, id)
		}
	}
	slices.SortFunc(missing, func(a, b shredd.ID) int { return bytes.Compare(a[:], b[:]) })
	// Not kept as records here: reconcileRecords kept those that still
	// matter (the ones no epoch has shredded yet).
	if err := appendLedger(ctx, s, missing, false); err != nil {
		return 0, err
	}
	return len(missing), nil
}

// reapply commits a forget of the ledger again in a database that lacks
// it. A forget of the same subject the database already has for the
// subject's current life (made after the restore, or the same life's
// earlier forget) is left as it is: the subject's key is destroyed either
// way, and applied is false (it is not counted as re-applied). A forget
// followed by a reinstatement (reinstated_at) is not one: the subject is
// live again in that database, and the ledger's later forget destroys the
// new generation (docs/operations.md, "Reinstatements and restores").
func (s *Eraser) reapply(ctx context.Context, id shredd.ID, sid envelope.SID, e ledger.Line) (applied bool, err error) {
	defer s.reg.LockSubject(sid)()
	var other []byte
	err = s.db.QueryRowContext(ctx, `SELECT id FROM forgets WHERE sid=? AND state<>? AND reinstated_at IS NULL LIMIT 1`, sid[:], shredd.StateRequested).Scan(&other)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM forgets WHERE id=? AND state=?`, id[:], shredd.StateRequested); err != nil {
		return false, fmt.Errorf("erasure: forget ledger: %w", err)
	}
	req := &forgetRequest{at: time.Unix(0, e.RequestedAt), commitment: e.Commitment, deadline: time.Unix(0, e.Deadline)}
	_, err = s.commit(ctx, id, sid, req)
	if errors.Is(err, errLost) {
		return false, nil // another forget of the subject, left requested: commitRequested finishes it
	}
	return true, err
}

// keptHead reads the head kept with the root for this ledger: nil and no
// error when none was kept, or when the root keeps forget records instead
// (s.records; the slot is then unused: the local root keeps one head).
func (s *Eraser) keptHead(ctx context.Context) (*ledger.Head, error) {
	if s.records != nil {
		return nil, nil
	}
	return keptHeadOf(ctx, s.keys.Root())
}

// KeepLedgerHead records the ledger's head in the local root file, where a
// restore of the database cannot roll it back. Called at start-up, after
// every epoch, before every backup, when the background work finds the
// head moved, and at shutdown. Without a ledger, with a damaged one, or
// with a root store that keeps forget records instead (Vault), it does
// nothing.
func (rc Recovery) KeepLedgerHead(ctx context.Context) error {
	s := rc.s
	return s.keepLedgerHead(ctx, true)
}

func (s *Eraser) keepLedgerHead(ctx context.Context, always bool) error {
	l := s.opts.Ledger
	if l == nil || s.records != nil {
		return nil
	}
	if err := l.KeepHead(ctx, s.keys.Root(), HeadStream, always); err != nil {
		return fmt.Errorf("erasure: %w", err)
	}
	if !l.HeadKept() {
		return nil
	}
	return s.pinHead(ctx)
}

// CompactLedger drops the ledger's first lines committed under root
// versions below minVersion (destroyed by an epoch): a database from
// before them is refused at start-up anyway. The lines dropped are a
// prefix, so the chain still verifies from the header, which records how
// many were dropped and the last one's hash; the file is rewritten through
// a fresh file and a rename (datadir.Replace). The head is then kept with
// the root, whether anything was dropped or not (once per epoch).
func (rc Recovery) CompactLedger(ctx context.Context, minVersion int) (int, error) {
	s := rc.s
	l := s.opts.Ledger
	if l == nil {
		return 0, nil
	}
	dropped, err := l.Compact(minVersion)
	if err != nil {
		return 0, err
	}
	if _, err := s.records.drop(ctx, minVersion); err != nil {
		return dropped, err
	}
	if err := s.keepLedgerHead(ctx, true); err != nil {
		return dropped, err
	}
	return dropped, nil
}
