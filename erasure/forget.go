package erasure

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/storage"
)

type forgetRow struct {
	id                                   shredd.ID
	sid                                  envelope.SID
	state                                string
	gen, barrier, rekeyMarker, epoch     sql.NullInt64
	requested, deadline                  int64
	committed, rekeyed, shredded, erased sql.NullInt64
	stall                                sql.NullString // why a read-back keeps it where it is
}

const forgetCols = `SELECT id, sid, state, gen, barrier, rekey_marker, epoch, requested_at, deadline, committed_at, rekeyed_at, shredded_at, erased_at, stall_reason FROM forgets`

func scanForget(sc interface{ Scan(...any) error }) (forgetRow, error) {
	var r forgetRow
	var id, sid []byte
	err := sc.Scan(&id, &sid, &r.state, &r.gen, &r.barrier, &r.rekeyMarker, &r.epoch, &r.requested, &r.deadline, &r.committed, &r.rekeyed, &r.shredded, &r.erased, &r.stall)
	copy(r.id[:], id)
	copy(r.sid[:], sid)
	return r, err
}

// queryForgets reads the forgets a query selects (forgetCols followed by
// tail), closing the rows before it returns so callers may write.
func (c *core) queryForgets(ctx context.Context, tail string, args ...any) ([]forgetRow, error) {
	rows, err := c.db.QueryContext(ctx, forgetCols+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("erasure: forgets: %w", err)
	}
	defer rows.Close()
	var out []forgetRow
	for rows.Next() {
		r, err := scanForget(rows)
		if err != nil {
			return nil, fmt.Errorf("erasure: forgets: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: forgets: %w", err)
	}
	return out, nil
}

func ts(n sql.NullInt64) time.Time { return registry.Time(n) }

func (s *Eraser) view(ctx context.Context, r forgetRow, rr *rootRead) (shredd.Forget, error) {
	return s.viewFrom(ctx, r, rr, nil)
}

// viewFrom is view, the verification judged from facts when not nil (read
// with a group's: viewMany).
func (s *Eraser) viewFrom(ctx context.Context, r forgetRow, rr *rootRead, facts *verifyFacts) (shredd.Forget, error) {
	f := shredd.Forget{ID: r.id, State: r.state, Barrier: r.barrier.Int64,
		RequestedAt: time.Unix(0, r.requested).UTC(), Deadline: time.Unix(0, r.deadline).UTC(),
		CommittedAt: ts(r.committed), RekeyedAt: ts(r.rekeyed), ShreddedAt: ts(r.shredded), ErasedAt: ts(r.erased),
		Epoch: r.epoch.Int64, TProp: s.keys.CacheTTL()}
	cond := func(name string, ok bool, okWhy, pendingWhy string) {
		c := shredd.Condition{Name: name, Status: "pending", Reason: pendingWhy}
		if ok {
			c.Status, c.Reason = "ok", okWhy
		}
		f.Conditions = append(f.Conditions, c)
	}
	notYet := "the forget has not committed yet"
	if !r.committed.Valid && r.stall.Valid {
		notYet = r.stall.String
	}
	destroyed := "the subject key was deleted and the barrier is in place: every later encrypt, decrypt or registration of the subject is refused"
	if r.committed.Valid && r.gen.Int64 == 0 {
		destroyed = "no key was ever issued for this subject: nothing was sealed under it, and the tombstone in its place refuses every later encrypt, decrypt or registration of the subject"
	}
	cond("key_destroyed", r.committed.Valid, destroyed, notYet)
	if s.keys.PerSubject() {
		cond("subject_key_deleted", r.rekeyed.Valid,
			"the subject's own Transit key was deleted in Vault: every copy of its wrapped keys, backups included, is unreadable",
			"waiting for the subject's Transit key to be deleted in Vault")
	} else {
		cond("bucket_rekeyed", r.rekeyed.Valid,
			"the subject's bucket key was replaced and its live keys rewrapped",
			"waiting for the subject's bucket key to be replaced")
		waitEpoch := "waiting for a root epoch to rotate the root key and destroy the versions that could open pre-forget backups"
		if r.committed.Valid && !r.shredded.Valid && r.stall.Valid {
			waitEpoch = r.stall.String
		}
		cond("epoch_rotated", r.shredded.Valid,
			fmt.Sprintf("root epoch %d rotated the root key and destroyed the older versions", r.epoch.Int64),
			waitEpoch)
	}
	var v []shredd.Condition
	var err error
	if r.erased.Valid {
		v, err = s.proofOf(ctx, r.id) // the evidence that erased it, as it was
	} else {
		v, _, err = s.verification(ctx, r, rr, facts)
	}
	if err != nil {
		return shredd.Forget{}, err
	}
	if r.stall.Valid && r.shredded.Valid && !r.erased.Valid {
		// The read-back before signing disagreed: whatever the conditions
		// say now, the forget is not erased until it reads back.
		for i := range v {
			if v[i].Name == shredd.CondReadPathConverged {
				v[i].Status, v[i].Reason = "pending", r.stall.String
			}
		}
	}
	f.Verification = v
	blocked := false
	for _, c := range v {
		blocked = blocked || c.Status == "failed"
	}
	switch {
	case r.erased.Valid:
		f.State = shredd.StateErased
		f.Overdue = f.ErasedAt.After(f.Deadline) // erased, but late
	case blocked:
		f.State = shredd.StateBlocked
		f.Overdue = s.opts.Now().After(f.Deadline)
	case s.opts.Now().After(f.Deadline):
		f.State, f.Overdue = shredd.StateOverdue, true
	}
	return f, nil
}

// Forget erases a subject: it writes the barrier and destroys the subject's
// key (synchronously, before it returns), then leaves the bucket re-key and
// the root epoch to the background work. Forgetting a subject again returns
// the same forget.
func (s *Eraser) Forget(ctx context.Context, subject string) (shredd.Forget, error) {
	if err := checkSubject(subject); err != nil {
		return shredd.Forget{}, err
	}
	sid := s.hasher.SID(subject)
	defer s.reg.LockSubject(sid)()
	for attempt := 1; ; attempt++ {
		// The subject's key first. A committed forget leaves its subject
		// forgotten, so a subject with a live key or none has no forget
		// but one a crash left requested or another node's racing this one:
		// the first attempt goes to the group, whose insert finds the
		// subject taken then (errLost), and the next attempt reads that
		// forget. One read fewer for each new forget.
		st, gen, err := s.keys.State(ctx, sid)
		if err != nil {
			return shredd.Forget{}, fmt.Errorf("erasure: forget: %w", err)
		}
		if attempt > 1 || st == keystore.SubjectForgotten {
			r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE sid=? AND reinstated_at IS NULL`, sid[:]))
			if err == nil {
				return forgetAgain(ctx, s, subject, sid, r)
			} else if !errors.Is(err, sql.ErrNoRows) {
				return shredd.Forget{}, fmt.Errorf("erasure: forget: %w", err)
			}
		}
		id, err := s.newID()
		if err != nil {
			return shredd.Forget{}, err
		}
		now := s.opts.Now()
		salt := s.subjectSalt(ctx, sid, st, gen)
		req := &forgetRequest{at: now, commitment: attest.Commit(subject, salt), saltSealed: s.hasher.SealSalt(subject, id[:], salt)}
		answers, err := s.commit(ctx, id, sid, req)
		if errors.Is(err, errLost) && attempt < 3 {
			// Another node's forget of the subject committed first (the
			// database holds one per subject): answer with that one.
			continue
		} else if err != nil && !errors.Is(err, errStalled) {
			return shredd.Forget{}, err
		}
		s.Kick()
		f, err := answers.get(ctx, s, id)
		f.Salt = salt
		return f, err
	}
}

// forgetAgain answers a forget of a subject the database already holds a
// forget of, r: a repeated forget (the first answer lost on its way), or
// one another node made meanwhile. It is the same forget, with the salt
// the first answer carried, for this caller names the subject again.
func forgetAgain(ctx context.Context, s *Eraser, subject string, sid envelope.SID, r forgetRow) (shredd.Forget, error) {
	var f shredd.Forget
	var err error
	if r.state == shredd.StateRequested { // a commit that failed or crashed: finish it now
		if _, err := s.commit(ctx, r.id, sid, nil); err != nil && !errors.Is(err, errStalled) {
			return shredd.Forget{}, err
		}
		if f, err = s.GetForget(ctx, r.id); err != nil {
			return shredd.Forget{}, err
		}
	} else {
		if err := s.ledgerAppend(ctx, r.id); err != nil { // an earlier answer failed there
			return shredd.Forget{}, err
		}
		if f, err = s.view(ctx, r, nil); err != nil {
			return shredd.Forget{}, err
		}
	}
	f.Salt, err = s.storedSalt(ctx, subject, r.id)
	return f, err
}

// forgetRequest is a new forget's row, written by the transaction that
// commits it.
type forgetRequest struct {
	at         time.Time
	commitment string
	saltSealed []byte    // the commitment's salt, sealed (registry.Hasher.SealSalt); nil for none
	deadline   time.Time // zero: at + Options.Deadline
}

// errStalled is commit's answer when the subject key's deletion did not
// read back: the forget stays requested with the reason (stall_reason),
// and is answered as it is rather than as committed.
var errStalled = errors.New("erasure: forget stalled: a read-back disagrees")

// errLost is commit's answer when the database already holds a forget of
// the subject (another node's, committed first): nothing was written, and
// the caller answers with that forget.
var errLost = errors.New("erasure: forget: the subject has a forget already")

// storedSalt opens the commitment salt stored with forget id, sealed for
// subject; nil for a forget of a release that kept none.
func (s *Eraser) storedSalt(ctx context.Context, subject string, id shredd.ID) ([]byte, error) {
	var sealed []byte
	if err := s.db.QueryRowContext(ctx, `SELECT salt_sealed FROM forgets WHERE id=?`, id[:]).Scan(&sealed); err != nil {
		return nil, fmt.Errorf("erasure: forget: %w", err)
	}
	if sealed == nil {
		return nil, nil
	}
	salt, err := s.hasher.OpenSalt(subject, id[:], sealed)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget %s: the stored commitment salt does not open: %w", id, shredd.ErrIntegrity)
	}
	return salt, nil
}

// stall records why forget id stays where it is: a read-back found a fact
// its next state asserts untrue. The reason is shown as the pending
// condition's, until a later attempt succeeds. q is the database, or the
// transaction that also writes the forget's request.
func (s *Eraser) stall(ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, id shredd.ID, why error) error {
	if _, err := q.ExecContext(ctx, `UPDATE forgets SET stall_reason=? WHERE id=?`, stallReason(why), id[:]); err != nil {
		return fmt.Errorf("erasure: forget: %w", err)
	}
	return nil
}

func stallReason(err error) string {
	return "stalled: " + strings.TrimPrefix(err.Error(), "keystore: ") + "; shredd claims nothing it cannot read back (docs/operations.md, \"Read-backs\")"
}

// commit destroys the subject key and moves the forget to committed, then
// purges the key from memory and appends the forget's ledger line. It
// shares the transaction and the ledger's fsync with the forgets committed
// at the same time (committer). With req, the same transaction first
// writes the forget's row (a new forget: one transaction); without, the
// row is one a crash left requested (data dirs of earlier releases wrote
// it in a transaction of its own). Called with the subject's barrier lock
// held (or at recovery, before serving), and it returns with the forget
// durable, in the database and in the ledger, and with the group's
// answers (nil when it did not commit: GetForget answers then).
func (s *Eraser) commit(ctx context.Context, id shredd.ID, sid envelope.SID, req *forgetRequest) (*groupAnswers, error) {
	// The ledger's room for the line first: a full disk refuses the forget
	// here, before anything commits (shredd.ErrDiskFull).
	release, err := s.ledgerReserve()
	if err != nil {
		return nil, err
	}
	defer release()
	m := &member{id: id, sid: sid, req: req}
	err = s.group.do(m)
	return m.answers, err
}

// GetForget returns a forget with its conditions.
// An id migration 0007 merged into another forget of its subject answers
// with that forget (its own id in it).
func (s *Eraser) GetForget(ctx context.Context, id shredd.ID) (shredd.Forget, error) {
	// The alias resolved in the same statement (resolveAlias's table).
	r, err := scanForget(s.db.QueryRowContext(ctx, forgetCols+` WHERE id = coalesce((SELECT forget FROM forget_aliases WHERE id=?), ?)`, id[:], id[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Forget{}, fmt.Errorf("erasure: forget %s: %w", id, shredd.ErrNotFound)
	}
	if err != nil {
		return shredd.Forget{}, fmt.Errorf("erasure: forget: %w", err)
	}
	return s.view(ctx, r, nil)
}

// viewMany returns the views of forgets ids (a group commit's), as
// GetForget would, reading the rows and the verifications' facts of all of
// them together (readFacts). An id not found is absent.
func viewMany(ctx context.Context, s *Eraser, ids []shredd.ID) (map[shredd.ID]shredd.Forget, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id[:]
	}
	rows, err := s.queryForgets(ctx, ` WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`)`, args...)
	if err != nil {
		return nil, err
	}
	var open []forgetRow // committed, not erased: verified now
	for _, r := range rows {
		if r.committed.Valid && !r.erased.Valid {
			open = append(open, r)
		}
	}
	facts := map[shredd.ID]*verifyFacts{}
	if len(open) > 0 {
		fs, err := readFacts(ctx, s, open, s.opts.Now())
		if err != nil {
			return nil, err
		}
		for i, r := range open {
			facts[r.id] = &fs[i]
		}
	}
	out := make(map[shredd.ID]shredd.Forget, len(rows))
	for _, r := range rows {
		f, err := s.viewFrom(ctx, r, nil, facts[r.id])
		if err != nil {
			return nil, err
		}
		out[r.id] = f
	}
	return out, nil
}

// Forgets lists forgets, newest first, optionally only those in state.
func (s *Eraser) Forgets(ctx context.Context, state string, limit int) ([]shredd.Forget, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	// The reported state mixes the pipeline (in the state column) and the
	// verdict (erased, overdue): filter after computing it.
	rs, err := s.queryForgets(ctx, ` ORDER BY requested_at DESC`)
	if err != nil {
		return nil, err
	}
	out := []shredd.Forget{}
	var rr rootRead // the root store asked once for the listing
	for _, r := range rs {
		if len(out) == limit {
			break
		}
		f, err := s.view(ctx, r, &rr)
		if err != nil {
			return nil, err
		}
		if state == "" || f.State == state {
			out = append(out, f)
		}
	}
	return out, nil
}

// Kick asks the background work to run soon.
func (s *Eraser) Kick() { s.wake() }

// Reconcile drives every forget as far as it can go now: it commits forgets
// a crash left requested, re-keys the buckets of committed forgets, and marks
// shredded those an epoch completed after. It is safe to call at any time;
// the background work (Run) calls it when kicked and every second.
func (s *Eraser) Reconcile(ctx context.Context) error {
	unlock, err := s.lockWork(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return s.reconcileLocked(ctx)
}

// recoverWait bounds Recover's wait for the cluster's work lock.
const recoverWait = 5 * time.Second

// Recover commits the forgets a crash left requested (written, key not yet
// destroyed): what must hold before serving. The rest of Reconcile (bucket
// re-keys, shredded states) is background work that can take long after a
// burst of forgets, so serve leaves it to Run and starts at once.
func (s *Eraser) Recover(ctx context.Context) error {
	if s.db.Shared() {
		// Another node may hold the work lock for a long re-key pass; its
		// reconciliation commits requested forgets too, and so will this
		// node's background work: do not hold up the start for it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, recoverWait)
		defer cancel()
	}
	unlock, err := s.lockWork(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return s.commitRequested(ctx)
}

// commitRequested commits the forgets a crash left between request and
// commit.
func (s *Eraser) commitRequested(ctx context.Context) error {
	pending, err := s.queryForgets(ctx, ` WHERE state=?`, shredd.StateRequested)
	if err != nil {
		return err
	}
	for _, r := range pending {
		unlock := s.reg.LockSubject(r.sid)
		_, err := s.commit(ctx, r.id, r.sid, nil)
		unlock()
		if err != nil && !errors.Is(err, errStalled) { // a stalled forget holds up no other
			return err
		}
	}
	return nil
}

func (s *Eraser) reconcileLocked(ctx context.Context) error {
	// 1. Forgets a crash left between request and commit.
	if err := s.commitRequested(ctx); err != nil {
		return err
	}
	// 2. Re-key the buckets of committed forgets.
	if s.keys.PerSubject() {
		pending, err := s.queryForgets(ctx, ` WHERE state=? AND rekeyed_at IS NULL`, shredd.StateCommitted)
		if err != nil {
			return err
		}
		if err := s.destroySubjects(ctx, pending); err != nil {
			return err
		}
	} else if err := rekeyCommitted(ctx, s); err != nil {
		return err
	}
	// 3. Shredded: an epoch completed after the re-key.
	return s.advanceShredded(ctx)
}

// rekeyPass bounds the forgets one re-key pass reads and holds in memory
// (their rows, buckets and ids for the marks: about 300 bytes a forget in
// a heap profile). A backlog larger than that is re-keyed pass after
// pass. Unbounded, a pass held every forget waiting, and under a stream of
// forgets at scale the backlog grows faster than passes retire it: 18.8
// MiB of the heap at 62,691 forgets (P7, docs/performance.md "Memory").
// 16,384 forgets fall in all but about e⁻⁴ of the default 4,096 buckets,
// so a pass still re-keys each bucket once for about four forgets.
var rekeyPass = 16384

// rekeyCommitted re-keys the buckets of the forgets committed and not yet
// re-keyed, rekeyPass forgets a pass (Eraser.rekeyBuckets), until a pass
// finds fewer or marks none. Only forgets committed before it started are
// taken: those committed meanwhile wait for the next reconcile, as they
// did when one pass took the whole backlog, so a stream of forgets cannot
// keep it (and the work lock) from the shredded states and the epochs.
func rekeyCommitted(ctx context.Context, s *Eraser) error {
	start := s.opts.Now().UnixNano()
	for {
		pending, err := s.queryForgets(ctx, ` WHERE state=? AND rekeyed_at IS NULL AND committed_at <= ? LIMIT ?`,
			shredd.StateCommitted, start, rekeyPass)
		if err != nil {
			return err
		}
		if s.rekeyRead != nil {
			s.rekeyRead(len(pending))
		}
		marked, err := s.rekeyBuckets(ctx, pending)
		if err != nil || len(pending) < rekeyPass || marked == 0 {
			return err
		}
	}
}

// destroySubjects destroys the keys of committed forgets in per-subject
// mode: each is shredded at once.
func (s *Eraser) destroySubjects(ctx context.Context, pending []forgetRow) error {
	for _, r := range pending {
		if err := s.shred.DestroySubject(ctx, r.sid); err != nil {
			return mapKeyErr(err)
		}
		if rb := s.readBackKeys(ctx, r); rb != nil {
			if !errors.Is(rb, keystore.ErrReadBack) {
				return mapKeyErr(rb)
			}
			if err := s.stall(ctx, s.db, r.id, rb); err != nil {
				return err
			}
			continue
		}
		now := s.opts.Now().UnixNano()
		if _, err := s.db.ExecContext(ctx, `UPDATE forgets SET rekeyed_at=?, shredded_at=?, state=? WHERE id=? AND state=?`,
			now, now, shredd.StateShredded, r.id[:], shredd.StateCommitted); err != nil {
			return fmt.Errorf("erasure: reconcile: %w", err)
		}
		crashpoint.Hit("forget:rekeyed")
	}
	return nil
}

// rekeyBuckets re-keys the buckets of committed forgets in one pass
// (keystore.Shredder.RekeyBuckets), and marks each forget re-keyed in the
// transaction that switches its bucket: forget by forget, the pass queued
// at the write gate behind the forgets' own commits and fell behind a
// steady stream of them, and a transaction of its own for the marks held
// the forgets' shards once more, for another fsync. The forgets of the
// buckets re-keyed before an error stay marked. It returns how many
// forgets it marked.
func (s *Eraser) rekeyBuckets(ctx context.Context, pending []forgetRow) (marked int, err error) {
	if len(pending) == 0 {
		return 0, nil
	}
	buckets := make([]int, 0, len(pending))
	ids := make(map[int][]any, len(pending)) // the forgets of each bucket
	for _, r := range pending {
		b := s.keys.BucketOf(r.sid)
		buckets = append(buckets, b)
		ids[b] = append(ids[b], r.id[:])
	}
	now := s.opts.Now().UnixNano()
	markers, err := s.shred.RekeyBuckets(ctx, buckets, func(ctx context.Context, tx *storage.Tx, switched []int, marker int64) error {
		var of []any
		for _, b := range switched {
			of = append(of, ids[b]...)
		}
		for i := 0; i < len(of); i += markChunk {
			if err := markRekeyedTx(ctx, tx, of[i:min(i+markChunk, len(of))], marker, now); err != nil {
				return err
			}
		}
		marked += len(of)
		return nil
	})
	if len(markers) > 0 {
		crashpoint.Hit("forget:rekeyed")
	}
	if err != nil {
		return marked, mapKeyErr(err)
	}
	return marked, nil
}

// markChunk bounds the forgets of one statement of markRekeyedTx: one
// parameter a forget, far below any engine's limit on a statement's
// parameters (SQLite's 32766, PostgreSQL's 65535). A pass's forgets are
// as many as were waiting, so the bound is the chunk's, not the pass's.
const markChunk = 1000

// markRekeyedTx records in tx, in one statement, the re-key at now of the
// forgets ids, with marker.
func markRekeyedTx(ctx context.Context, tx *storage.Tx, ids []any, marker, now int64) error {
	args := append([]any{now, marker}, ids...)
	if _, err := tx.ExecContext(ctx, `UPDATE forgets SET rekeyed_at=?, rekey_marker=?
		WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`)`, args...); err != nil {
		return fmt.Errorf("erasure: reconcile: %w", err)
	}
	return nil
}

// advanceShredded marks shredded the re-keyed forgets an epoch completed
// after. Only forgets re-keyed before the newest completed epoch are read:
// the others (most of them, between epochs) wait for the next one, and
// reading them all on every kick made the background work grow with the
// number of forgets waiting.
func (s *Eraser) advanceShredded(ctx context.Context) error {
	last, err := s.shred.LastDoneEpoch(ctx)
	if err != nil {
		return mapKeyErr(err)
	}
	pending, err := s.queryForgets(ctx, ` WHERE state=? AND rekeyed_at IS NOT NULL AND rekey_marker < ?`, shredd.StateCommitted, last)
	if err != nil {
		return err
	}
	var root *keystore.Versions // the root store's own report, asked once for the pass
	for _, r := range pending {
		e, err := s.shred.EpochAfter(ctx, r.rekeyMarker.Int64)
		if errors.Is(err, keystore.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if root == nil {
			v, err := s.shred.RootVersions(ctx)
			if err != nil {
				return mapKeyErr(err)
			}
			root = &v
		}
		// Read back before claiming shredded: the key row, the bucket's
		// re-wrap and the root store's trim, each from where it lives.
		if rb := s.shred.CheckShredded(ctx, r.sid, e, *root); rb != nil {
			if !errors.Is(rb, keystore.ErrReadBack) {
				return mapKeyErr(rb)
			}
			if err := s.stall(ctx, s.db, r.id, rb); err != nil {
				return err
			}
			continue
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE forgets SET state=?, shredded_at=?, epoch=?, stall_reason=NULL WHERE id=? AND state=?`,
			shredd.StateShredded, e.FinishedAt.UnixNano(), e.ID, r.id[:], shredd.StateCommitted); err != nil {
			return fmt.Errorf("erasure: reconcile: %w", err)
		}
	}
	return nil
}

// needEpoch reports whether an epoch should run now: at once when a crash
// interrupted one, and once due when any forget waits for one.
func (s *Eraser) needEpoch(ctx context.Context, due bool) (bool, error) {
	if interrupted, err := s.shred.Interrupted(ctx); err != nil || interrupted {
		return interrupted, err
	}
	if !due {
		return false, nil
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM forgets WHERE state=?`, shredd.StateCommitted).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}

// epochDue is needEpoch for the background work, with due read from the
// database: interval has passed since the newest epoch started, whichever
// node ran it (since this node's start, before the first). Asked again
// under the work lock (runEpoch), it keeps the cluster at one background
// epoch per interval: a node that waited for the lock while another ran
// an epoch finds that epoch, and runs none of its own.
func epochDue(ctx context.Context, s *Eraser, interval time.Duration, started time.Time) (bool, error) {
	last := started
	e, err := s.shred.LastEpoch(ctx)
	switch {
	case err == nil:
		last = e.StartedAt
	case !errors.Is(err, keystore.ErrNotFound):
		return false, mapKeyErr(err)
	}
	return s.needEpoch(ctx, s.opts.Now().Sub(last) >= interval)
}

// RunEpoch re-keys what is pending, runs a root epoch (or resumes an
// interrupted one) and marks shredded the forgets it completes.
//
// A call that comes while an epoch is left running (interrupted, or
// another node's in progress) asks for that epoch: when it completes while
// the call waits for the work lock (the background work or another node
// resumed it), it answers the call, and no second epoch runs. Without
// that, a call that queued behind the background work resuming an
// interrupted epoch rotated the root a second time. A call that comes
// while no epoch runs runs its own.
func (s *Eraser) RunEpoch(ctx context.Context) (shredd.Epoch, error) {
	before, err := s.shred.LastEpoch(ctx)
	switch {
	case errors.Is(err, keystore.ErrNotFound):
		before = shredd.Epoch{}
	case err != nil:
		return shredd.Epoch{}, mapKeyErr(err)
	}
	if s.epochAsked != nil {
		s.epochAsked()
	}
	var answered shredd.Epoch
	need := func(ctx context.Context) (bool, error) {
		now, err := s.shred.LastEpoch(ctx)
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			return true, nil
		case err != nil:
			return false, mapKeyErr(err)
		}
		if before.State == "running" && now.State == "done" {
			answered = now
			return false, nil
		}
		return true, nil
	}
	e, ran, err := runEpoch(ctx, s, need)
	if err == nil && !ran {
		return answered, nil
	}
	return e, err
}

// runEpoch is RunEpoch; with need, it asks need again once it holds the
// work lock and runs no epoch (ran false) when it says no: the background
// work decided without the lock, and meanwhile another node may have
// finished the interrupted epoch it saw, after which a fresh epoch would
// rotate the root once more.
func runEpoch(ctx context.Context, s *Eraser, need func(context.Context) (bool, error)) (_ shredd.Epoch, ran bool, _ error) {
	unlock, err := s.lockWork(ctx)
	if err != nil {
		return shredd.Epoch{}, false, err
	}
	defer unlock()
	if err := s.reconcileLocked(ctx); err != nil {
		return shredd.Epoch{}, false, err
	}
	if need != nil {
		if ok, err := need(ctx); err != nil || !ok {
			return shredd.Epoch{}, false, err
		}
	}
	e, err := s.shred.RunEpoch(ctx)
	if err != nil {
		return shredd.Epoch{}, false, mapKeyErr(err)
	}
	if s.opts.AfterEpoch != nil {
		s.opts.AfterEpoch()
	}
	return e, true, s.advanceShredded(ctx)
}

// Run does the background work until ctx ends: reconcile whenever kicked and
// every few seconds, and an epoch every interval while forgets wait for one.
// Failures (such as an unreachable root store) are logged and retried with
// backoff; they never mark anything shredded.
func (s *Eraser) Run(ctx context.Context, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = time.Hour
	}
	started := s.opts.Now()
	backoff := time.Second
	var headWarned, recordsWarned time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-tick.C:
		}
		// The ledger's head moves with every forget: keep it with the root
		// within a second (docs/operations.md, "The forget ledger").
		if herr := s.keepLedgerHead(ctx, false); herr != nil && ctx.Err() == nil && time.Since(headWarned) > time.Minute {
			headWarned = time.Now() // once a minute, not every second
			log.Warn("the forget ledger's head could not be kept with the root; retrying", "error", herr.Error())
		}
		if rerr := syncRecords(ctx, s); rerr != nil && ctx.Err() == nil && time.Since(recordsWarned) > time.Minute {
			recordsWarned = time.Now()
			log.Warn("the forget records could not be read or kept with the root store; retrying", "error", rerr.Error())
		}
		err := s.Reconcile(ctx)
		if err == nil {
			err = s.probeUpkeep(ctx)
		}
		if err == nil {
			err = s.verifyAll(ctx)
		}
		if err == nil {
			// Decided from the database, and again under the work lock:
			// one epoch per interval for the cluster, not one per node.
			due := func(ctx context.Context) (bool, error) { return epochDue(ctx, s, interval, started) }
			var need bool
			need, err = due(ctx)
			if err == nil && need {
				start := s.opts.Now()
				var e shredd.Epoch
				var ran bool
				if e, ran, err = runEpoch(ctx, s, due); err == nil && ran {
					log.Info("epoch done", "epoch", e.ID, "root_version", e.ToVersion, "retired", len(e.Retired), "duration_ms", time.Since(start).Milliseconds())
				}
			}
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("background work failed; retrying", "error", err.Error(), "retry_in", backoff.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Minute)
			continue
		}
		backoff = time.Second
	}
}
