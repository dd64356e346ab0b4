package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/derivation"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/storage"
)

// Where a registration becomes durable: Queue hands it to the record
// writer (recordWriter), which takes the waiting ones as one group and
// writes them either as one frame of the registration WAL (walState.records
// below: ledger.Segments.Append, one fdatasync), where one process owns
// the database (SQLite), or in one transaction (writeRecords, PostgreSQL).

// Registration is one artifact to register: its id, kind and holder,
// whether shredd sealed it, its parents, its whole lineage at the key
// generations it was sealed under, which of its lineage subjects are its
// own (Direct), and its registration time.
type Registration struct {
	ID      shredd.ID
	Kind    string
	Holder  string
	Sealed  bool
	Parents []shredd.ID
	Lineage []envelope.Ref
	Direct  map[envelope.SID]bool
	At      time.Time
	Reads   []shredd.Read // the writer's reads it was checked against, and how it closed each
	Writer  string        // the reader the write answered for (Source.Reader); "" for none
}

// recordReq is one artifact registration waiting for the group commit.
type recordReq struct {
	Registration
	done chan error
}

// Pending is a registration queued for the group commit (Queue).
type Pending struct {
	done   chan error
	ctx    context.Context // with the store timeout, from the queueing (storage.DB.Bound)
	cancel context.CancelFunc
}

// Wait returns once the registration is written or refused, with its
// refusal: ErrShredded when a lineage subject is no longer live,
// ErrUnknownKind for a kind never registered. Where the database has a
// store timeout (PostgreSQL), it returns at the latest when that passed
// since Queue, with an error wrapping storage.ErrDBUnavailable: the writer
// still writes or refuses the registration in its own time, and its
// transaction checks every lineage subject live in the database, so the
// barrier holds without the caller's locks.
func (p Pending) Wait() error {
	defer p.cancel()
	return await(p.ctx, p.done)
}

// await waits for a background writer's answer on done, or until ctx's
// deadline (the store timeout: storage.DB.Bound) passes: a group commit
// queued behind one that waits for a server that stopped answering would
// otherwise wait for both, past the bound a request promises. Without a
// deadline it waits for the answer.
func await(ctx context.Context, done <-chan error) error {
	if _, ok := ctx.Deadline(); !ok {
		return <-done
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("registry: no answer from the database in time: %w: %w", storage.ErrDBUnavailable, ctx.Err())
	}
}

// Queue hands a registration to the group commit: a transaction that
// first checks, inside the database, that every lineage subject is still
// live (the check and the write are atomic against a forget's commit), and
// is shared with the registrations that arrive meanwhile (recordWriter).
// The caller holds the barrier read locks of the lineage (RLockSubjects)
// until Wait returns, so that a forget of one of its subjects cannot commit
// in between; once queued, a registration is always answered, whatever ctx
// does. Queue fails when the registry is closed (ErrUnavailable) or ctx
// ends first.
func (s *Registry) Queue(ctx context.Context, reg Registration) (Pending, error) {
	r := recordReq{Registration: reg, done: make(chan error, 1)}
	ctx, cancel := s.db.Bound(ctx)
	if err := enqueue(ctx, s, s.recordQ, r); err != nil {
		cancel()
		return Pending{}, err
	}
	return Pending{done: r.done, ctx: ctx, cancel: cancel}, nil
}

// errClosed answers the calls that need a background writer after Close.
var errClosed = fmt.Errorf("service closed: %w", shredd.ErrUnavailable)

// enqueue hands r to a background writer's queue, unless the registry is
// closed (errClosed) or ctx ends first. The writers drain their queues after
// Close, so a request queued is always answered.
func enqueue[T any](ctx context.Context, s *Registry, q chan<- T, r T) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return errClosed
	}
	select {
	case q <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// maxRecordGroup bounds the registrations of one group commit.
const maxRecordGroup = 512

// recordWriter commits registrations in groups, as leaseWriter does leases:
// one transaction (one fsync) per encrypt would bound encrypts by the disk.
// Requests that arrive while a commit runs share the next one.
func (s *Registry) recordWriter() {
	defer close(s.recordDone)
	kinds := map[string]bool{} // kinds known to exist: a kind is never deleted
	write := s.writeRecords
	if s.ws != nil {
		write = s.ws.records // the registration WAL (below; wal.go, fold.go)
	}
	last := 1 // the last group's size (collect)
	for first := range s.recordQ {
		batch := collect(s.recordQ, first, maxRecordGroup, last)
		last = len(batch)
		for i, err := range write(batch, kinds) {
			batch[i].done <- err
		}
		if s.ws == nil {
			s.kickFlush()
		}
	}
}

// flushInterval bounds how often the background flush of the database's
// pages runs.
const flushInterval = 50 * time.Millisecond

// kickFlush asks the pageFlusher to flush soon.
func (s *Registry) kickFlush() {
	select {
	case s.flushKick <- struct{}{}:
	default:
	}
}

// pageFlusher copies the pages of the database's own write-ahead log
// (SQLite's, not the registration WAL) into the database file in the
// background, at most every flushInterval, after group commits
// (storage.DB.FlushPages): the connections copy them by themselves only
// past a bound of pages, so that commits return without copying pages (a
// flush after many commits copies a hot page once). It runs alongside
// readers and the writer. Errors are left to the next attempt: the
// database's write-ahead log only grows.
func (s *Registry) pageFlusher() {
	for {
		select {
		case <-s.stop:
			return
		case <-s.flushKick:
		}
		_ = s.db.FlushPages(context.Background())
		select {
		case <-s.stop:
			return
		case <-time.After(flushInterval):
		}
	}
}

// records (walState.records) appends a group of registrations to the WAL, one frame and
// one fdatasync, after checking each (its lineage live, its kind
// registered; a refused item is left out), and returns each item's
// error. An item is acknowledged only once the frame is synced and the
// registration is in the tail.
func (ws *walState) records(batch []recordReq, kinds map[string]bool) []error {
	ctx := context.Background()
	errs := make([]error, len(batch))
	ws.mu.Lock()
	markErr, since := ws.markErr, ws.markFailedAt
	ws.mu.Unlock()
	if markErr != nil && time.Since(since) > markGrace {
		// What is acknowledged now would be in no mark: past the grace
		// (a Vault failover takes seconds), fail closed until the folder
		// keeps the mark again (it retries every second).
		for i := range errs {
			errs[i] = fmt.Errorf("registry: the registration WAL's mark cannot be kept with the root, so nothing more is acknowledged until it can: %w: %w", shredd.ErrUnavailable, markErr)
		}
		return errs
	}
	ws.waitRoom()
	notLive, err := ws.checkLiveCached(ctx, batch)
	if err != nil {
		for i := range errs {
			errs[i] = MapKeyErr(err)
		}
		return errs
	}
	accepted := make([]*Registration, 0, len(batch))
	for i := range batch {
		if errs[i] = checkRecord(ctx, ws.db, kinds, notLive, &batch[i].Registration); errs[i] == nil {
			accepted = append(accepted, &batch[i].Registration)
		}
	}
	if len(accepted) == 0 {
		return errs
	}
	ws.segMu.Lock()
	first := ws.w.Next()
	ws.frame = appendFrame(ws.frame[:0], ws.w.Key(), first, accepted)
	err = ws.w.Append(ws.frame, len(accepted))
	ws.segMu.Unlock()
	if cap(ws.frame) > 4<<20 {
		ws.frame = nil // do not keep a huge group's buffer
	}
	if err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	ws.mu.Lock()
	for j, r := range accepted {
		rec := &walRecord{seq: first + uint64(j), reg: *r}
		ws.tail = append(ws.tail, rec)
		ws.byID[r.ID] = &rec.reg
	}
	ws.acked = first + uint64(len(accepted)) - 1
	ws.mu.Unlock()
	ws.wake()
	return errs
}

// writeRecords writes a group of registrations in one transaction and
// returns the error of each. Each item is checked inside the transaction
// (its lineage live, its kind registered) before its rows are written, so a
// refused item writes nothing and does not affect the others. When the
// shared transaction itself fails (a database error), each item is written
// again alone, so that the failure is only its own.
func (s *Registry) writeRecords(batch []recordReq, kinds map[string]bool) []error {
	errs, err := s.writeGroup(batch, kinds)
	if err == nil {
		return errs
	}
	if len(batch) == 1 {
		return []error{err}
	}
	out := make([]error, len(batch))
	for i := range batch {
		e, err := s.writeGroup(batch[i:i+1], kinds)
		if err != nil {
			out[i] = err
		} else {
			out[i] = e[0]
		}
	}
	return out
}

// writeGroup writes registrations in one transaction. It returns each
// item's refusal, or an error for the whole group when the transaction
// failed (nothing of the group was written then).
func (s *Registry) writeGroup(batch []recordReq, kinds map[string]bool) ([]error, error) {
	// Every statement within the store timeout, prepared ones included.
	ctx, cancel := s.db.Bound(context.Background())
	defer cancel()
	refs := distinctRefs(len(batch), func(i int) []envelope.Ref { return batch[i].Lineage })
	// The transaction declares its lineage's shards (touching): groups of
	// other nodes commit beside it, a forget waits for it or it for the
	// forget.
	tx, err := s.db.BeginTouching(ctx, s.touching(refs))
	if err != nil {
		return nil, fmt.Errorf("registry: record: %w", err)
	}
	defer tx.Rollback()
	// Every lineage subject of the group is checked live in this
	// transaction (a query per hundred subjects): no forget can commit
	// before it ends.
	notLive, err := s.checkLive(ctx, tx, refs)
	if err != nil {
		return nil, MapKeyErr(err)
	}
	errs := make([]error, len(batch))
	rows := make([]recordReq, 0, len(batch))
	for i, r := range batch {
		if errs[i] = checkRecord(ctx, tx, kinds, notLive, &r.Registration); errs[i] == nil {
			rows = append(rows, r)
		}
	}
	if err := insertStaged(ctx, tx, s.db.Shared(), rows); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("registry: record: %w", err)
	}
	return errs, nil
}

// distinctRefs returns the refs of the lineages of a group's n items
// (lineage(i)), each once, in the order first met: what the group's
// transaction declares and checks live.
func distinctRefs(n int, lineage func(i int) []envelope.Ref) []envelope.Ref {
	var refs []envelope.Ref
	seen := map[envelope.Ref]bool{}
	for i := range n {
		for _, ref := range lineage(i) {
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	return refs
}

// checkRecord checks one registration, inside the group's transaction or,
// with the registration WAL, against the database its writer reads: every
// lineage subject still live at its generation (the barrier: notLive holds
// the refs of the group that are not), the kind registered. known caches
// the kinds seen registered (a kind is never deleted).
func checkRecord(ctx context.Context, q rowQuerier, known map[string]bool, notLive map[envelope.Ref]error, r *Registration) error {
	for _, ref := range r.Lineage {
		if err := notLive[ref]; err != nil {
			return MapKeyErr(err)
		}
	}
	if known[r.Kind] {
		return nil
	}
	ok, err := kindRegistered(ctx, q, r.Kind)
	if err != nil {
		return fmt.Errorf("registry: record: %w", err)
	}
	if !ok {
		return fmt.Errorf("registry: kind %q: %w", r.Kind, shredd.ErrUnknownKind)
	}
	known[r.Kind] = true
	return nil
}

// checkLive returns the refs that are not live, with their errors. On a
// database other processes share (PostgreSQL), a query per hundred refs
// (keystore.CheckLiveMany), as each query is a round trip; on SQLite, in
// process, one prepared query per ref, which costs less than planning one
// query over many.
func (s *Registry) checkLive(ctx context.Context, tx *storage.Tx, refs []envelope.Ref) (map[envelope.Ref]error, error) {
	if s.db.Shared() {
		return s.live.CheckLiveMany(ctx, tx, refs)
	}
	out := map[envelope.Ref]error{}
	for _, ref := range refs {
		if err := s.live.CheckLive(ctx, tx, []envelope.Ref{ref}); err != nil {
			if !errors.Is(err, keystore.ErrNotFound) && !errors.Is(err, keystore.ErrShredded) {
				return nil, err
			}
			out[ref] = err
		}
	}
	return out, nil
}

// insertStaged writes the rows of a group's artifacts: the artifacts, and
// their graph rows into the staging tables (derivation.Stage; Settle). On
// SQLite, in process, one prepared single-row statement per table costs
// less than planning a statement per group (each connection keeps its
// prepared statements: storage/sqlite.StmtCache); on a shared database the
// group is one statement (insertStagedShared).
func insertStaged(ctx context.Context, tx *storage.Tx, shared bool, recs []recordReq) error {
	if shared {
		return insertStagedShared(ctx, tx, recs)
	}
	for _, r := range recs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO artifacts(id, kind, holder, sealed, created_at, writer) VALUES (?, ?, ?, ?, ?, ?)`,
			r.ID[:], r.Kind, r.Holder, r.Sealed, r.At.UnixNano(), nullString(r.Writer)); err != nil {
			return fmt.Errorf("registry: record: %w", err)
		}
	}
	return derivation.Stage(ctx, tx, graphRows(recs), 1)
}

// graphRows returns the derivation graph's rows of recs.
func graphRows(recs []recordReq) []derivation.Row {
	rows := make([]derivation.Row, len(recs))
	for i, r := range recs {
		rows[i] = derivation.Row{ID: r.ID, Parents: r.Parents, Lineage: r.Lineage, Direct: r.Direct, Reads: r.Reads}
	}
	return rows
}

// stagedSharedSQL writes a group's artifact, parent and lineage rows in
// one statement from one array per column: one round trip for the group
// whatever its size (each statement of a group transaction is one, and on
// PostgreSQL a transaction of a few registrations costs more in round
// trips than in rows), and one statement text, which the driver prepares
// once per connection. The artifacts' rows are $1 to $5, the graph's
// derivation.StagedSharedSQL's.
const stagedSharedSQL = `WITH a AS (
	INSERT INTO artifacts(id, kind, holder, sealed, created_at, writer)
	SELECT * FROM unnest($1::bytea[], $2::text[], $3::text[], $4::boolean[], $5::bigint[], $15::text[])
), ` + derivation.StagedSharedSQL

// insertStagedShared writes recs with stagedSharedSQL.
func insertStagedShared(ctx context.Context, tx *storage.Tx, recs []recordReq) error {
	if len(recs) == 0 {
		return nil
	}
	var (
		ids, kinds, holders = make([][]byte, len(recs)), make([]string, len(recs)), make([]string, len(recs))
		sealed, at          = make([]bool, len(recs)), make([]int64, len(recs))
	)
	writers := make([]*string, len(recs))
	for i, r := range recs {
		ids[i], kinds[i], holders[i], sealed[i], at[i] = r.ID[:], r.Kind, r.Holder, r.Sealed, r.At.UnixNano()
		if r.Writer != "" {
			writers[i] = &recs[i].Writer
		}
	}
	args := append([]any{ids, kinds, holders, sealed, at}, derivation.StagedSharedArgs(graphRows(recs))...)
	args = append(args, writers) // $15
	if _, err := tx.ExecContext(ctx, stagedSharedSQL, args...); err != nil {
		return fmt.Errorf("registry: record: %w", err)
	}
	return nil
}

// insertLineage writes the graph rows of artifacts whose artifact rows are
// written (the fold of the registration WAL, on SQLite),
// derivation.FoldRowsPerInsert rows a statement.
func insertLineage(ctx context.Context, tx *storage.Tx, recs []recordReq) error {
	return derivation.Stage(ctx, tx, graphRows(recs), derivation.FoldRowsPerInsert)
}

// insertRecord writes the rows of one artifact of a bulk import, its
// lineage and parents straight into the settled graph (derivation.Insert).
func insertRecord(ctx context.Context, tx *storage.Tx, id shredd.ID, kind, holder string, sealed bool, now time.Time, parents []shredd.ID,
	refs []envelope.Ref, direct func(envelope.SID) bool) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO artifacts(id, kind, holder, sealed, created_at) VALUES (?, ?, ?, ?, ?)`,
		id[:], kind, holder, sealed, now.UnixNano()); err != nil {
		return fmt.Errorf("registry: record: %w", err)
	}
	return derivation.Insert(ctx, tx, id, parents, refs, direct)
}
