package erasure

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/registry"
	"github.com/shredd/shredd/storage"
)

// maxForgetGroup bounds the forgets of one group commit. A group holds the
// database's write gate for its whole transaction, and what queues behind
// it (a re-key chunk, registrations, leases) waits that long: 64 forgets
// keep that wait near one commit of a few forgets, while concurrent
// clients (tens) still share one commit and one ledger fsync.
const maxForgetGroup = 64

// member is one forget of a group commit: the forget to commit, and where
// its own outcome goes.
type member struct {
	id   shredd.ID
	sid  envelope.SID
	req  *forgetRequest // nil: the row exists, left requested
	err  error          // its own outcome, set by commitTx (errStalled ...)
	done chan error

	answers *groupAnswers // the views of the group's committed members, once committed
}

// groupAnswers answers the forgets a group committed: the first member to
// ask reads the views of all of them (viewMany, a statement for all of
// them per read), the others take theirs.
type groupAnswers struct {
	ids   []shredd.ID
	once  sync.Once
	views map[shredd.ID]shredd.Forget
	err   error
}

// get returns forget id's view, read with its group's; nil g (the member
// did not commit) or an id the group's read missed: read alone.
func (g *groupAnswers) get(ctx context.Context, s *Eraser, id shredd.ID) (shredd.Forget, error) {
	if g == nil {
		return s.GetForget(ctx, id)
	}
	g.read(ctx, s)
	if g.err != nil {
		return shredd.Forget{}, g.err
	}
	if f, ok := g.views[id]; ok {
		return f, nil
	}
	return s.GetForget(ctx, id)
}

// read reads the views of the group's forgets, once, for every member: one
// caller's cancellation must not fail the others' answers (the database's
// own deadlines bound it).
func (g *groupAnswers) read(ctx context.Context, s *Eraser) {
	g.once.Do(func() { g.views, g.err = viewMany(context.WithoutCancel(ctx), s, g.ids) })
}

// committer commits concurrent forgets in groups, as the registry's group
// writers do registrations and leases: one transaction, one database fsync
// and one ledger fsync for the forgets that wait together, each with its
// own outcome. A one-forget-per-transaction commit bounded forgets by two
// fsyncs each (issue 25).
//
// No goroutine lives while nothing waits: the first forget to find no
// group running starts one (drain), which takes what is queued, a group
// at a time, and ends when the queue is empty. The Eraser has no Close,
// and a goroutine that ends by itself needs none.
type committer struct {
	s       *Eraser
	mu      sync.Mutex
	queue   []*member
	running bool
}

// do commits the forget m in a group and returns its outcome. The caller
// holds m's barrier lock (registry.Registry.LockSubject) and keeps it until
// do returns, so the lock covers the commit and the ledger line. Once
// queued, m is always answered, whatever the caller's context does:
// releasing the lock before the commit would let a registration of the
// subject be acknowledged behind the barrier.
func (c *committer) do(m *member) error {
	m.done = make(chan error, 1)
	c.mu.Lock()
	c.queue = append(c.queue, m)
	if !c.running {
		c.running = true
		go c.drain()
	}
	c.mu.Unlock()
	return <-m.done
}

// drain commits the queued forgets, at most maxForgetGroup at a time, until
// none is left. A group's answers (its ledger lines, durable, then each
// member's view) are made while the next group commits: the ledger's
// fsync (and, with a root store that keeps forget records, its write)
// is not a wait for the forgets queued behind it. At most one group is
// being answered while another commits, in commit order.
func (c *committer) drain() {
	var answering chan struct{} // closed once the last group is answered; nil: none is
	wait := func() {
		if answering != nil {
			<-answering
			answering = nil
		}
	}
	for {
		c.mu.Lock()
		n := min(len(c.queue), maxForgetGroup)
		if n == 0 && answering != nil {
			c.mu.Unlock()
			wait() // then look again: what queued meanwhile is this drain's
			continue
		}
		if n == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		group := c.queue[:n:n]
		c.queue = c.queue[n:]
		c.mu.Unlock()
		c.commitGroup(group)
		wait()
		answering = make(chan struct{})
		go func(done chan struct{}) {
			defer close(done)
			c.answer(group)
		}(answering)
	}
}

// commitGroup commits a group; answer answers its members. Every member
// holds its barrier lock: the fold first brings into the tables every
// registration acknowledged before any of the locks, so each member's
// barrier covers them, and none of its subject can be acknowledged before
// the commit. When the shared transaction fails, each member is committed
// alone, so that the failure is only its own.
func (c *committer) commitGroup(group []*member) {
	// The members' requests wait here whatever their callers do (do):
	// the group's work is bounded by the database's own deadlines.
	ctx := context.Background()
	if err := c.s.reg.Fold(ctx); err != nil {
		for _, m := range group {
			m.err = fmt.Errorf("erasure: forget: %w", err)
		}
		return
	}
	if err := c.commitTx(ctx, group); err != nil {
		if len(group) == 1 {
			group[0].err = err
		} else {
			for _, m := range group {
				if m.err != nil {
					continue // stalled before the group failed: answered
				}
				if err := c.commitTx(ctx, []*member{m}); err != nil {
					m.err = err
				}
			}
		}
	}
}

// answer answers the members of a group commitGroup committed: the
// committed ones' ledger lines are durable (finish) before any of them is
// answered, and their views are read in the meantime (groupAnswers).
func (c *committer) answer(group []*member) {
	ctx := context.Background()
	answers := &groupAnswers{}
	for _, m := range group {
		if m.err == nil {
			answers.ids = append(answers.ids, m.id)
		}
	}
	if len(answers.ids) > 0 {
		// The read runs beside the ledger's fsync; nothing is answered
		// before the fsync, and a failed append answers with its error.
		go answers.read(ctx, c.s)
	}
	err := c.finish(ctx, group)
	for _, m := range group {
		if m.err == nil {
			m.err = err
		}
		if m.err == nil {
			m.answers = answers
		}
		m.done <- m.err
	}
}

// finish does, for the members that committed, what follows the commit:
// their keys purged from memory, then their ledger lines appended with one
// fsync, durable before any of them is answered.
func (c *committer) finish(ctx context.Context, group []*member) error {
	var ids []shredd.ID
	for _, m := range group {
		if m.err == nil {
			c.s.keys.Purge(m.sid)
			ids = append(ids, m.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	crashpoint.Hit("forget:committed")
	// The trace outside the database, durable before the forgets are
	// answered (docs/operations.md, "Backups and restores").
	return c.s.ledgerAppend(ctx, ids...)
}

// commitTx commits the members in one transaction: for each, its row
// written (with req), its subject key destroyed (keystore.Shredder.ForgetManyTx)
// and read back, its barrier and its forget_committed event. A member
// whose read-back disagrees (keystore.ErrReadBack) stalls alone: the
// transaction is abandoned, its request and the reason are committed in a
// transaction of their own (its err is errStalled), and the others start
// again without it. Stalls are faults or attacks, rare enough that
// starting over costs less than a savepoint per member on every commit.
// Any other error is the whole group's, and nothing of the group is
// written then.
func (c *committer) commitTx(ctx context.Context, group []*member) error {
	for len(group) > 0 {
		stalled, err := c.tryTx(ctx, group)
		if err != nil || stalled < 0 {
			return err
		}
		m := group[stalled]
		group = append(group[:stalled:stalled], group[stalled+1:]...)
		m.err = c.stallTx(ctx, m)
	}
	return nil
}

// tryTx runs commitTx's transaction once: it returns the index of the first
// member whose read-back disagrees (nothing committed then), or -1 once
// the transaction committed. Its statements are a fixed number for the
// whole group, not a number per member: every round trip in it is a wait
// for the writers queued behind its locks (docs/performance-archive.md). It
// declares its members' shards, exclusively (storage.TxOptions): the
// registrations and leases of those subjects, and another node's forget
// of one of them, wait for it, while writers of other shards (another
// node's forget group among them) commit beside it, and the sequence lock
// orders its evictions and log entries (forgetMany).
func (c *committer) tryTx(ctx context.Context, group []*member) (int, error) {
	o := storage.TxOptions{Exclusive: true, Shards: make([]int, len(group))}
	for i, m := range group {
		o.Shards[i] = c.s.keys.ShardOf(m.sid)
	}
	tx, err := c.s.db.BeginTouching(ctx, o)
	if err != nil {
		return -1, fmt.Errorf("erasure: forget: %w", err)
	}
	defer tx.Rollback()
	inserted, err := c.insertMany(ctx, tx, group)
	if err != nil {
		return -1, err
	}
	var live []*member // the members whose forget is this node's
	var sids []envelope.SID
	for i, m := range group {
		if !inserted[i] {
			m.err = errLost // another node's forget of the subject: the caller answers with it
			continue
		}
		m.err = nil // lost in an earlier try whose winner rolled back
		live, sids = append(live, m), append(sids, m.sid)
	}
	if len(live) > 0 {
		if stalled, err := c.forgetMany(ctx, tx, live, sids); err != nil || stalled != nil {
			return slices.Index(group, stalled), err
		}
	}
	if err := tx.Commit(); err != nil {
		return -1, fmt.Errorf("erasure: forget: %w", err)
	}
	return -1, nil
}

// forgetMany destroys the keys of members live (of subjects sids) in tx,
// reads back that they are gone, commits their rows and logs their
// forget_committed events. It returns the first member whose read-back
// disagrees (its err set, the transaction to be abandoned), or nil.
func (c *committer) forgetMany(ctx context.Context, tx *storage.Tx, live []*member, sids []envelope.SID) (*member, error) {
	gens, err := c.s.shred.ForgetManyTx(ctx, tx, sids)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget: %w", err)
	}
	// Read back before claiming: the keys must be gone from where they
	// live (a planted trigger or a fault that ignores the deletion makes
	// the forget stall, requested, with the reason; never committed).
	gone, err := c.s.shred.KeysGoneTx(ctx, tx, sids)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget: %w", err)
	}
	for i, rb := range gone {
		if rb != nil {
			live[i].err = rb
			return live[i], nil
		}
	}
	committed, err := c.commitRows(ctx, tx, live, gens)
	if err != nil {
		return nil, err
	}
	if c.s.opts.Journal == nil {
		return nil, c.s.shred.EvictManyTx(ctx, tx, sids)
	}
	var logIDs [][16]byte // the forget_committed events, appended together
	var logEvs []attest.Event
	var evSIDs []envelope.SID
	var evGens []uint32
	for i, m := range live {
		if r, ok := committed[m.id]; ok && r.commitment != "" { // "": made by a release without commitments
			logIDs, evSIDs, evGens = append(logIDs, m.id), append(evSIDs, m.sid), append(evGens, gens[i])
		}
	}
	keyIdx, err := journal.KeyCreatedIndexes(ctx, tx, evSIDs, evGens)
	if err != nil {
		return nil, err
	}
	for i, id := range logIDs {
		r := committed[id]
		logEvs = append(logEvs, attest.Event{Event: attest.EventForgetCommitted, Forget: &attest.ForgetEvent{
			Forget: shredd.ID(id).String(), Subject: r.commitment, Generation: evGens[i], Barrier: r.barrier, KeyCreated: keyIdx[i]}})
	}
	// The events signed before the sequence lock, not under it.
	signed, err := c.s.opts.Journal.SignForgets(logEvs)
	if err != nil {
		return nil, err
	}
	// Last, what is numbered in commit order: the evictions, then the log
	// entries, under the sequence lock (storage.Tx.Sequence), which the
	// group holds from here to its commit.
	if err := c.s.shred.EvictManyTx(ctx, tx, sids); err != nil {
		return nil, err
	}
	return nil, c.s.opts.Journal.AppendSigned(ctx, tx, logIDs, signed)
}

// committedRow is what the commit of a forget row returns: the
// forget_committed event needs them.
type committedRow struct {
	commitment string
	barrier    int64
}

// commitRows commits the requested forget rows of members live (gens[i]
// destroyed for live[i]) in one statement, with the group's barrier, and
// returns the rows it committed; a row committed already (by another
// node's reconciliation) is not among them.
func (c *committer) commitRows(ctx context.Context, tx *storage.Tx, live []*member, gens []uint32) (map[shredd.ID]committedRow, error) {
	var cases strings.Builder
	args := []any{shredd.StateCommitted}
	ids := make([]any, 0, len(live))
	for i, m := range live {
		cases.WriteString(" WHEN ? THEN CAST(? AS BIGINT)")
		args = append(args, m.id[:], int64(gens[i]))
		ids = append(ids, m.id[:])
	}
	args = append(args, c.s.opts.Now().UnixNano())
	args = append(append(args, ids...), shredd.StateRequested)
	rows, err := tx.QueryContext(ctx, `UPDATE forgets SET state=?, gen=CASE id`+cases.String()+` ELSE gen END, committed_at=?, stall_reason=NULL,
		barrier=`+registry.LastSeqSQL+` WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`) AND state=?
		RETURNING id, coalesce(commitment, ''), barrier`, args...)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget: %w", err)
	}
	defer rows.Close()
	out := make(map[shredd.ID]committedRow, len(live))
	for rows.Next() {
		var b []byte
		var r committedRow
		if err := rows.Scan(&b, &r.commitment, &r.barrier); err != nil {
			return nil, fmt.Errorf("erasure: forget: %w", err)
		}
		var id shredd.ID
		copy(id[:], b)
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("erasure: forget: %w", err)
	}
	return out, nil
}

// stallTx commits the request of member m, whose read-back (m.err)
// disagreed, requested, with the reason: Recover tries it again, and its
// view says why it is not committed. It returns m's outcome.
func (c *committer) stallTx(ctx context.Context, m *member) error {
	rb := m.err
	tx, err := c.s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("erasure: forget: %w", err)
	}
	defer tx.Rollback()
	if inserted, err := c.insert(ctx, tx, m); err != nil || !inserted {
		if err == nil {
			err = errLost
		}
		return err
	}
	if err := c.s.stall(ctx, tx, m.id, rb); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("erasure: forget: %w", err)
	}
	return fmt.Errorf("%w: %w", errStalled, rb)
}

// insert writes m's forget row in tx, when m is a new forget. It reports
// false when the database already holds a forget of m's subject (one
// forget per subject, a unique index: another node's, committed first),
// and writes nothing then.
func (c *committer) insert(ctx context.Context, tx *storage.Tx, m *member) (bool, error) {
	req := m.req
	if req == nil {
		return true, nil
	}
	if req.deadline.IsZero() {
		req.deadline = req.at.Add(c.s.opts.Deadline)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO forgets(id, sid, state, requested_at, deadline, commitment, salt_sealed) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(sid) WHERE reinstated_at IS NULL DO NOTHING`,
		m.id[:], m.sid[:], shredd.StateRequested, req.at.UnixNano(), req.deadline.UnixNano(), nullString(req.commitment), req.saltSealed)
	if err != nil {
		return false, fmt.Errorf("erasure: forget: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("erasure: forget: %w", err)
	}
	return n == 1, nil
}

// insertMany is insert for the members of a group in one statement:
// inserted[i] reports whether group[i]'s forget is this node's (its row
// written now, or existing and left requested: req nil).
func (c *committer) insertMany(ctx context.Context, tx *storage.Tx, group []*member) ([]bool, error) {
	inserted := make([]bool, len(group))
	var args []any
	for i, m := range group {
		req := m.req
		if req == nil {
			inserted[i] = true
			continue
		}
		if req.deadline.IsZero() {
			req.deadline = req.at.Add(c.s.opts.Deadline)
		}
		args = append(args, m.id[:], m.sid[:], shredd.StateRequested, req.at.UnixNano(), req.deadline.UnixNano(), nullString(req.commitment), req.saltSealed)
	}
	if len(args) == 0 {
		return inserted, nil
	}
	written, err := idSet(ctx, tx, `INSERT INTO forgets(id, sid, state, requested_at, deadline, commitment, salt_sealed) VALUES `+
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", len(args)/7), ", ")+`
		ON CONFLICT(sid) WHERE reinstated_at IS NULL DO NOTHING RETURNING id`, args...)
	if err != nil {
		return nil, fmt.Errorf("erasure: forget: %w", err)
	}
	for i, m := range group {
		if m.req != nil {
			inserted[i] = written[m.id]
		}
	}
	return inserted, nil
}
