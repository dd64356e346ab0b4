package sealing

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/envelope"
	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/storage"
)

// Options configures a Service. Zero values take the defaults.
type Options struct {
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// Rand is the randomness source for ids, salts and nonces (crypto/rand
	// by default).
	Rand io.Reader
	// LeaseTTL is how long a decrypt's lease lasts (DefaultLeaseTTL).
	LeaseTTL time.Duration
}

// Service is the registry over one database and key tree: it seals and
// opens data under the keys of its lineage, records artifacts and leases,
// and holds the barrier locks that package erasure's forgets take.
type Service struct {
	db     *storage.DB
	keys   *keystore.Store
	hasher *Hasher
	opts   Options

	barrier  Barrier
	settleMu sync.Mutex // one Settle at a time

	leaseQ    chan leaseReq
	recordQ   chan recordReq
	ckptKick  chan struct{} // a group commit happened: checkpoint soon
	stop      chan struct{} // closed by Close
	closeOnce sync.Once
	closeMu   sync.RWMutex // held shared while queueing a request; Close takes it to close the queues
	closed    bool
}

// New opens the registry in db, whose schema storage/sqlite made.
func New(ctx context.Context, db *storage.DB, keys *keystore.Store, hasher *Hasher, opts Options) (*Service, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	svc := &Service{db: db, keys: keys, hasher: hasher, opts: opts, leaseQ: make(chan leaseReq, 1024),
		recordQ: make(chan recordReq, 1024), ckptKick: make(chan struct{}, 1), stop: make(chan struct{})}
	go svc.leaseWriter()
	go svc.recordWriter()
	go svc.checkpointer()
	go svc.settleLoop()
	return svc, nil
}

// Barrier is the per-subject locks that order registrations against
// forgets: a registration holds the read side of every subject of its
// lineage while it checks the subjects are live and commits, and a forget
// holds the write side of its subject while it commits the barrier, so
// that nothing registered after a forget's commit can carry the subject.
// Subjects share 4096 stripes.
type Barrier struct{ stripes [4096]sync.RWMutex }

// stripe returns the barrier lock index of a subject.
func stripe(sid envelope.SID) int { return int(binary.BigEndian.Uint16(sid[:2]) % 4096) }

// Lock takes the write side of sid's barrier lock (a forget's commit) and
// returns the unlock.
func (b *Barrier) Lock(sid envelope.SID) func() {
	mu := &b.stripes[stripe(sid)]
	mu.Lock()
	return mu.Unlock
}

// RLock takes the read side of the barrier locks of every sid, in
// ascending order so that concurrent callers cannot deadlock, and returns
// the unlock.
func (b *Barrier) RLock(sids []envelope.SID) func() {
	idx := make([]int, 0, len(sids))
	for _, sid := range sids {
		idx = append(idx, stripe(sid))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		b.stripes[i].RLock()
	}
	return func() {
		for _, i := range idx {
			b.stripes[i].RUnlock()
		}
	}
}

// Barrier returns the registry's barrier locks, which the erasure service
// takes to commit a forget.
func (s *Service) Barrier() *Barrier { return &s.barrier }

// DB returns the registry's database.
func (s *Service) DB() *storage.DB { return s.db }

// Keys returns the registry's key tree.
func (s *Service) Keys() *keystore.Store { return s.keys }

// Hasher returns the registry's subject hasher.
func (s *Service) Hasher() *Hasher { return s.hasher }

func (s *Service) newID() (shredd.ID, error) { return shredd.NewID(s.opts.Now(), s.opts.Rand) }

// MapKeyErr turns key tree errors into the domain's errors.
func MapKeyErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, keystore.ErrShredded), errors.Is(err, keystore.ErrVersionDestroyed):
		// A key under a destroyed root version (a database restored from
		// before an epoch) is as erased as a deleted one.
		return fmt.Errorf("%w: %w", shredd.ErrShredded, err)
	case errors.Is(err, keystore.ErrNotFound):
		return fmt.Errorf("%w: subject key not found: %w", shredd.ErrEnvelope, err)
	case errors.Is(err, keystore.ErrUnavailable):
		return fmt.Errorf("%w: %w", shredd.ErrUnavailable, err)
	}
	return err
}

// PutKind registers a kind, or updates its description. It reports whether
// the kind is new.
func (s *Service) PutKind(ctx context.Context, name, description string) (shredd.Kind, bool, error) {
	if !shredd.ValidKind(name) {
		return shredd.Kind{}, false, fmt.Errorf("sealing: kind name: %w", shredd.ErrInvalid)
	}
	if len(description) > 1024 {
		return shredd.Kind{}, false, fmt.Errorf("sealing: kind description over 1024 bytes: %w", shredd.ErrInvalid)
	}
	now := s.opts.Now()
	res, err := s.db.ExecContext(ctx, `INSERT INTO kinds(name, description, created_at) VALUES (?, ?, ?)
		ON CONFLICT(name) DO NOTHING`, name, description, now.UnixNano())
	if err != nil {
		return shredd.Kind{}, false, fmt.Errorf("sealing: put kind: %w", err)
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		if _, err := s.db.ExecContext(ctx, `UPDATE kinds SET description=? WHERE name=?`, description, name); err != nil {
			return shredd.Kind{}, false, fmt.Errorf("sealing: put kind: %w", err)
		}
	}
	var k shredd.Kind
	var created int64
	if err := s.db.QueryRowContext(ctx, `SELECT name, description, created_at FROM kinds WHERE name=?`, name).Scan(&k.Name, &k.Description, &created); err != nil {
		return shredd.Kind{}, false, fmt.Errorf("sealing: put kind: %w", err)
	}
	k.CreatedAt = time.Unix(0, created).UTC()
	return k, n == 1, nil
}

// Kinds lists the registered kinds by name.
func (s *Service) Kinds(ctx context.Context) ([]shredd.Kind, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, description, created_at FROM kinds ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sealing: kinds: %w", err)
	}
	defer rows.Close()
	out := []shredd.Kind{}
	for rows.Next() {
		var k shredd.Kind
		var created int64
		if err := rows.Scan(&k.Name, &k.Description, &created); err != nil {
			return nil, fmt.Errorf("sealing: kinds: %w", err)
		}
		k.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, k)
	}
	return out, rows.Err()
}

// plan is a validated source with its lineage resolved.
type plan struct {
	kind    string
	holder  string
	parents []shredd.ID
	direct  map[envelope.SID]bool
	subject map[envelope.SID]string // raw ids of the direct subjects, for the log's commitments; never stored
	lineage map[envelope.SID]uint32 // parent lineage generations (0: direct-only, take current)
	sids    []envelope.SID          // sorted
}

// resolve validates src and resolves its lineage. known holds the lineages
// of parents read beforehand (a batch's, parentsOf); other parents are read
// from the database.
func (s *Service) resolve(ctx context.Context, src shredd.Source, known map[shredd.ID][]envelope.Ref) (*plan, error) {
	if !shredd.ValidKind(src.Kind) {
		return nil, fmt.Errorf("sealing: kind name: %w", shredd.ErrInvalid)
	}
	if src.Holder != "" && !shredd.ValidHolder(src.Holder) {
		return nil, fmt.Errorf("sealing: holder id: %w", shredd.ErrInvalid)
	}
	if len(src.Leases) > MaxParents {
		return nil, fmt.Errorf("sealing: %d leases, at most %d: %w", len(src.Leases), MaxParents, shredd.ErrTooLarge)
	}
	for _, lid := range src.Leases {
		l, err := s.GetLease(ctx, lid)
		if err != nil {
			return nil, leaseErr(lid, err)
		}
		src.Parents = append(src.Parents, l.Artifact)
	}
	if len(src.Subjects) == 0 && len(src.Parents) == 0 {
		return nil, fmt.Errorf("sealing: an artifact needs a subject or a parent: %w", shredd.ErrInvalid)
	}
	if len(src.Subjects) > MaxSubjects {
		return nil, fmt.Errorf("sealing: %d subjects, at most %d: %w", len(src.Subjects), MaxSubjects, shredd.ErrTooLarge)
	}
	if len(src.Parents) > MaxParents {
		return nil, fmt.Errorf("sealing: %d parents, at most %d: %w", len(src.Parents), MaxParents, shredd.ErrTooLarge)
	}
	p := &plan{kind: src.Kind, holder: src.Holder, direct: map[envelope.SID]bool{}, subject: map[envelope.SID]string{}, lineage: map[envelope.SID]uint32{}}
	for i, subj := range src.Subjects {
		if err := CheckSubject(subj); err != nil {
			return nil, fmt.Errorf("subject %d: %w", i, err)
		}
		sid := s.hasher.SID(subj)
		p.direct[sid] = true
		p.subject[sid] = subj
	}
	seen := map[shredd.ID]bool{}
	for _, par := range src.Parents {
		if seen[par] {
			continue
		}
		seen[par] = true
		p.parents = append(p.parents, par)
		refs, ok := known[par]
		if !ok {
			var err error
			if refs, err = s.parentRefs(ctx, par); err != nil {
				return nil, err
			}
		}
		for _, r := range refs {
			if g, ok := p.lineage[r.SID]; ok && g != r.Gen {
				return nil, fmt.Errorf("sealing: parents carry two generations of one subject: %w", shredd.ErrShredded)
			}
			p.lineage[r.SID] = r.Gen
		}
		if len(refs) == 0 {
			return nil, fmt.Errorf("sealing: parent %s: %w", par, shredd.ErrUnknownParent)
		}
	}
	all := map[envelope.SID]bool{}
	for sid := range p.direct {
		all[sid] = true
	}
	for sid := range p.lineage {
		all[sid] = true
	}
	if len(all) > envelope.MaxLineage {
		return nil, fmt.Errorf("sealing: lineage of %d subjects, at most %d: %w", len(all), envelope.MaxLineage, shredd.ErrTooLarge)
	}
	for sid := range all {
		p.sids = append(p.sids, sid)
	}
	slices.SortFunc(p.sids, func(a, b envelope.SID) int { return bytes.Compare(a[:], b[:]) })
	return p, nil
}

// leaseErr maps the error of reading a source's lease: an unknown lease is
// an unknown parent.
func leaseErr(lid shredd.ID, err error) error {
	if errors.Is(err, shredd.ErrNotFound) {
		return fmt.Errorf("sealing: lease %s: %w", lid, shredd.ErrUnknownParent)
	}
	return err
}

// parentRefs reads the lineage of one parent artifact; an artifact never
// registered has none, ErrUnknownParent.
func (s *Service) parentRefs(ctx context.Context, par shredd.ID) ([]envelope.Ref, error) {
	m, err := s.parentsOf(ctx, []shredd.ID{par})
	if err != nil {
		return nil, err
	}
	return m[par], nil
}

// placeholders returns "?1, ?2, ..., ?n": numbered, so that a statement can
// use the same arguments twice.
func placeholders(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?")
		b.WriteString(strconv.Itoa(i + 1))
	}
	return b.String()
}

// maxParentQuery bounds the ids of one parentsOf query.
const maxParentQuery = 256

// parentsOf reads the lineages of parent artifacts, a few queries for many
// parents. A parent never registered is absent from the map. The lineage
// rows of an artifact are written with it, in one transaction: an artifact
// has rows exactly when it is registered.
func (s *Service) parentsOf(ctx context.Context, ids []shredd.ID) (map[shredd.ID][]envelope.Ref, error) {
	out := make(map[shredd.ID][]envelope.Ref, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), maxParentQuery)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i := range chunk {
			args[i] = chunk[i][:]
		}
		// One statement reads both tables: one snapshot, so that an
		// artifact moving from one to the other (Settle) is read once.
		in := placeholders(len(chunk))
		q := `SELECT artifact, sid, gen FROM lineage WHERE artifact IN (` + in + `) UNION ALL SELECT artifact, sid, gen FROM lineage_staged WHERE artifact IN (` + in + `)`
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("sealing: parent: %w", err)
		}
		for rows.Next() {
			var a, sid []byte
			var gen uint32
			if err := rows.Scan(&a, &sid, &gen); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sealing: parent: %w", err)
			}
			var id shredd.ID
			var r envelope.Ref
			copy(id[:], a)
			copy(r.SID[:], sid)
			r.Gen = gen
			out[id] = append(out[id], r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("sealing: parent: %w", err)
		}
	}
	return out, nil
}

// keys fetches every subject key of the plan: the current key of a direct
// subject (created on first use), the parent's generation otherwise. Called
// under the barrier read locks.
func (s *Service) planKeys(ctx context.Context, p *plan) ([]envelope.SubjectKey, error) {
	out := make([]envelope.SubjectKey, 0, len(p.sids))
	for _, sid := range p.sids {
		var k envelope.SubjectKey
		var err error
		gen, inherited := p.lineage[sid]
		if inherited {
			k, err = s.keys.KeyAt(ctx, envelope.Ref{SID: sid, Gen: gen})
		} else {
			k, err = s.keys.KeyWithSubject(ctx, sid, p.subject[sid])
		}
		if err != nil {
			return nil, s.keyErr(ctx, err, p.refs())
		}
		out = append(out, k)
	}
	return out, nil
}

// refs lists the plan's lineage with the generations known before the keys
// are fetched (0 for a direct subject: its current generation).
func (p *plan) refs() []envelope.Ref {
	out := make([]envelope.Ref, len(p.sids))
	for i, sid := range p.sids {
		out[i] = envelope.Ref{SID: sid, Gen: p.lineage[sid]}
	}
	return out
}

// keyErr maps a key fetch error. When the key backend is unavailable, a
// forgotten subject elsewhere in the lineage still answers ErrShredded: the
// tombstones are local, so the barrier does not depend on the backend.
func (s *Service) keyErr(ctx context.Context, err error, refs []envelope.Ref) error {
	if errors.Is(err, keystore.ErrUnavailable) {
		for _, r := range refs {
			// r.Gen 0 is a direct subject's current generation (plan.refs);
			// a generation above the newest never existed and erased
			// nothing: not a reason for 410.
			st, gen, serr := s.keys.State(ctx, r.SID)
			if serr == nil && ((st == keystore.SubjectForgotten && r.Gen <= gen) || (r.Gen != 0 && r.Gen < gen)) {
				return fmt.Errorf("%w: a subject of the lineage was forgotten", shredd.ErrShredded)
			}
		}
	}
	return MapKeyErr(err)
}

// recordReq is one artifact registration waiting for the group commit.
type recordReq struct {
	id     shredd.ID
	p      *plan
	refs   []envelope.Ref
	sealed bool
	now    time.Time
	done   chan error
}

// record writes the artifact in a transaction that first checks, inside
// the database, that every lineage subject is still live: the check and the
// write are atomic against a forget's commit. The transaction is shared
// with the registrations that arrive meanwhile (recordWriter), and record
// returns once it committed. The caller holds the barrier read locks of the
// lineage until then, so a forget of one of its subjects cannot commit in
// between.
func (s *Service) record(ctx context.Context, id shredd.ID, p *plan, refs []envelope.Ref, sealed bool) (time.Time, error) {
	now := s.opts.Now()
	r := recordReq{id: id, p: p, refs: refs, sealed: sealed, now: now, done: make(chan error, 1)}
	if err := enqueue(ctx, s, s.recordQ, r); err != nil {
		return now, fmt.Errorf("sealing: record: %w", err)
	}
	// Once queued, the request is written or refused by the writer: wait for
	// its answer even if ctx ends, so that the caller's barrier locks cover
	// the write.
	return now, <-r.done
}

// errClosed answers the calls that need a background writer after Close.
var errClosed = fmt.Errorf("service closed: %w", shredd.ErrUnavailable)

// enqueue hands r to a background writer's queue, unless the service is
// closed (errClosed) or ctx ends first. The writers drain their queues after
// Close, so a request queued is always answered.
func enqueue[T any](ctx context.Context, s *Service, q chan<- T, r T) error {
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
func (s *Service) recordWriter() {
	kinds := map[string]bool{} // kinds known to exist: a kind is never deleted
	for first := range s.recordQ {
		batch := []recordReq{first}
	collect:
		for len(batch) < maxRecordGroup {
			select {
			case r, ok := <-s.recordQ:
				if !ok {
					break collect
				}
				batch = append(batch, r)
			default:
				break collect
			}
		}
		for i, err := range s.writeRecords(batch, kinds) {
			batch[i].done <- err
		}
		s.kickCheckpoint()
	}
}

// checkpointInterval bounds how often the background checkpoint runs.
const checkpointInterval = 50 * time.Millisecond

// kickCheckpoint asks the checkpointer for a checkpoint soon.
func (s *Service) kickCheckpoint() {
	select {
	case s.ckptKick <- struct{}{}:
	default:
	}
}

// checkpointer copies the WAL into the database file in the background,
// at most every checkpointInterval, after group commits: the connections
// checkpoint by themselves only past a bound of WAL pages, so
// that commits return without copying pages (a checkpoint of many commits
// copies a hot page once). A PASSIVE checkpoint runs alongside readers and
// the writer. Errors are left to the next attempt: the WAL only grows.
func (s *Service) checkpointer() {
	for {
		select {
		case <-s.stop:
			return
		case <-s.ckptKick:
		}
		_ = s.db.Checkpoint(context.Background())
		select {
		case <-s.stop:
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// writeRecords writes a group of registrations in one transaction and
// returns the error of each. Each item is checked inside the transaction
// (its lineage live, its kind registered) before its rows are written, so a
// refused item writes nothing and does not affect the others. When the
// shared transaction itself fails (a database error), each item is written
// again alone, so that the failure is only its own.
func (s *Service) writeRecords(batch []recordReq, kinds map[string]bool) []error {
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
func (s *Service) writeGroup(batch []recordReq, kinds map[string]bool) ([]error, error) {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sealing: record: %w", err)
	}
	defer tx.Rollback()
	st := newTxStmts(tx)
	defer st.close()
	// Every lineage subject of the group is checked live in this
	// transaction (a query per hundred subjects): no forget can commit
	// before it ends.
	var refs []envelope.Ref
	seen := map[envelope.Ref]bool{}
	for _, r := range batch {
		for _, ref := range r.refs {
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
	}
	notLive, err := s.checkLive(ctx, st, refs)
	if err != nil {
		return nil, MapKeyErr(err)
	}
	errs := make([]error, len(batch))
	rows := make([]recordReq, 0, len(batch))
	for i, r := range batch {
		if errs[i] = s.checkRecord(ctx, st, kinds, notLive, r); errs[i] == nil {
			rows = append(rows, r)
		}
	}
	if err := insertStaged(ctx, st, rows, s.db.Shared()); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sealing: record: %w", err)
	}
	crashpoint.Hit("artifact:recorded") // registered, not yet answered
	return errs, nil
}

// txStmts runs queries in a transaction, preparing each query text once:
// the registrations of a group run the same few queries many times.
type txStmts struct {
	tx *storage.Tx
	m  map[string]*sql.Stmt
}

func newTxStmts(tx *storage.Tx) *txStmts { return &txStmts{tx: tx, m: map[string]*sql.Stmt{}} }

func (t *txStmts) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := t.m[q]; ok {
		return st, nil
	}
	st, err := t.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	t.m[q] = st
	return st, nil
}

// QueryRowContext is the transaction's, with the statement prepared once.
func (t *txStmts) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := t.stmt(ctx, q)
	if err != nil {
		return t.tx.QueryRowContext(ctx, q, args...) // reports the error through Scan
	}
	return st.QueryRowContext(ctx, args...)
}

// ExecContext is the transaction's, with the statement prepared once.
func (t *txStmts) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (t *txStmts) close() {
	for _, st := range t.m {
		st.Close()
	}
}

// checkRecord checks one registration inside the transaction: every
// lineage subject still live at its generation (the barrier: notLive holds
// the refs of the group that are not, keystore.CheckLiveMany), the kind
// registered. known caches the kinds seen registered.
func (s *Service) checkRecord(ctx context.Context, st *txStmts, known map[string]bool, notLive map[envelope.Ref]error, r recordReq) error {
	for _, ref := range r.refs {
		if err := notLive[ref]; err != nil {
			return MapKeyErr(err)
		}
	}
	if known[r.p.kind] {
		return nil
	}
	var one int
	switch err := st.QueryRowContext(ctx, `SELECT 1 FROM kinds WHERE name=?`, r.p.kind).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sealing: kind %q: %w", r.p.kind, shredd.ErrUnknownKind)
	case err != nil:
		return fmt.Errorf("sealing: record: %w", err)
	}
	known[r.p.kind] = true
	return nil
}

// checkLive returns the refs that are not live, with their errors. On a
// database other processes share (PostgreSQL), a query per hundred refs
// (keystore.CheckLiveMany), as each query is a round trip; on SQLite, in
// process, one prepared query per ref, which costs less than planning one
// query over many.
func (s *Service) checkLive(ctx context.Context, st *txStmts, refs []envelope.Ref) (map[envelope.Ref]error, error) {
	if s.db.Shared() {
		return s.keys.CheckLiveMany(ctx, st.tx, refs)
	}
	out := map[envelope.Ref]error{}
	for _, ref := range refs {
		if err := s.keys.CheckLive(ctx, st, []envelope.Ref{ref}); err != nil {
			if !errors.Is(err, keystore.ErrNotFound) && !errors.Is(err, keystore.ErrShredded) {
				return nil, err
			}
			out[ref] = err
		}
	}
	return out, nil
}

// Rows per statement of insertStaged on a shared database: multi-row
// inserts, so that a group costs a few round trips instead of a few per
// artifact (3 to 7 times the registrations per second on PostgreSQL,
// BenchmarkRegister). On SQLite, in process, one prepared single-row
// statement per table costs less than planning a statement per group.
const (
	artifactRowsPerInsert = 100 // 5 parameters each
	lineageRowsPerInsert  = 200 // 4
	parentRowsPerInsert   = 250 // 2
)

// insertStaged writes the rows of a group's artifacts: the artifacts, and
// their parents and lineage into the staging tables (Settle); multi says
// whether to write many rows per statement.
func insertStaged(ctx context.Context, st *txStmts, recs []recordReq, multi bool) error {
	perArt, perParent, perLineage := 1, 1, 1
	if multi {
		perArt, perParent, perLineage = artifactRowsPerInsert, parentRowsPerInsert, lineageRowsPerInsert
	}
	arts := make([]any, 0, 5*len(recs))
	var lineage, parents []any
	for _, r := range recs {
		arts = append(arts, r.id[:], r.p.kind, r.p.holder, r.sealed, r.now.UnixNano())
		for _, par := range r.p.parents {
			parents = append(parents, r.id[:], par[:])
		}
		for _, ref := range r.refs {
			lineage = append(lineage, r.id[:], ref.SID[:], ref.Gen, r.p.direct[ref.SID])
		}
	}
	if err := insertRows(ctx, st, `INSERT INTO artifacts(id, kind, holder, sealed, created_at) VALUES `, 5, perArt, arts); err != nil {
		return err
	}
	if err := insertRows(ctx, st, `INSERT INTO parents_staged(artifact, parent) VALUES `, 2, perParent, parents); err != nil {
		return err
	}
	return insertRows(ctx, st, `INSERT INTO lineage_staged(artifact, sid, gen, direct) VALUES `, 4, perLineage, lineage)
}

// insertRows runs prefix with args as rows of cols values, at most per
// rows a statement.
func insertRows(ctx context.Context, st *txStmts, prefix string, cols, per int, args []any) error {
	for len(args) > 0 {
		n := min(len(args)/cols, per)
		if _, err := st.ExecContext(ctx, valuesSQL(prefix, cols, n), args[:n*cols]...); err != nil {
			return fmt.Errorf("sealing: record: %w", err)
		}
		args = args[n*cols:]
	}
	return nil
}

// valuesSQL returns prefix followed by n rows of cols placeholders.
func valuesSQL(prefix string, cols, n int) string {
	row := "(?" + strings.Repeat(", ?", cols-1) + ")"
	var b strings.Builder
	b.Grow(len(prefix) + n*(len(row)+2))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// insertRecord writes the rows of one artifact of a bulk import, its
// lineage and parents straight into lineage and artifact_parents.
func insertRecord(ctx context.Context, st *txStmts, id shredd.ID, kind, holder string, sealed bool, now time.Time, parents []shredd.ID,
	refs []envelope.Ref, direct func(envelope.SID) bool) error {
	if _, err := st.ExecContext(ctx, `INSERT INTO artifacts(id, kind, holder, sealed, created_at) VALUES (?, ?, ?, ?, ?)`,
		id[:], kind, holder, sealed, now.UnixNano()); err != nil {
		return fmt.Errorf("sealing: record: %w", err)
	}
	for _, par := range parents {
		if _, err := st.ExecContext(ctx, `INSERT INTO artifact_parents(artifact, parent) VALUES (?, ?)`, id[:], par[:]); err != nil {
			return fmt.Errorf("sealing: record: %w", err)
		}
	}
	for _, ref := range refs {
		if _, err := st.ExecContext(ctx, `INSERT INTO lineage(artifact, sid, gen, direct) VALUES (?, ?, ?, ?)`,
			id[:], ref.SID[:], ref.Gen, direct(ref.SID)); err != nil {
			return fmt.Errorf("sealing: record: %w", err)
		}
	}
	return nil
}

// Encrypt seals plaintext as a new artifact of src's kind under the keys of
// its whole lineage, bound to context, and registers it. The ciphertext is
// returned only once the registration committed, so nothing sealed after a
// forget's barrier can carry the forgotten subject.
func (s *Service) Encrypt(ctx context.Context, src shredd.Source, plaintext, context []byte) (shredd.Sealed, error) {
	var out shredd.Sealed
	err := s.seal(ctx, src, plaintext, context, func(id shredd.ID, b []byte, lineage int) {
		// The text form is Prefix and the binary form in unpadded base64url
		// (envelope.String).
		out = shredd.Sealed{Artifact: id, Ciphertext: envelope.Prefix + base64.RawURLEncoding.EncodeToString(b), Lineage: lineage}
	})
	return out, err
}

// EncryptBinary is Encrypt answering the binary form of the envelope
// (envelope.Parse reads it) instead of the text form: for large payloads,
// which the text form would grow by a third. It appends the envelope to
// dst (which may be nil), so that a caller can reuse buffers.
func (s *Service) EncryptBinary(ctx context.Context, src shredd.Source, plaintext, context, dst []byte) (shredd.ID, []byte, int, error) {
	var id shredd.ID
	var out []byte
	var n int
	err := s.sealTo(ctx, dst, src, plaintext, context, func(i shredd.ID, b []byte, lineage int) { id, out, n = i, b, lineage })
	return id, out, n, err
}

// seal seals and registers, then hands the binary envelope to done.
func (s *Service) seal(ctx context.Context, src shredd.Source, plaintext, context []byte, done func(shredd.ID, []byte, int)) error {
	return s.sealTo(ctx, nil, src, plaintext, context, done)
}

// checkSealable refuses a plaintext or context the envelope cannot hold,
// before anything is registered.
func checkSealable(plaintext, context []byte) error {
	if len(plaintext) > envelope.MaxPlaintext {
		return fmt.Errorf("sealing: plaintext of %d bytes: %w", len(plaintext), shredd.ErrTooLarge)
	}
	if len(context) > envelope.MaxContext {
		return fmt.Errorf("sealing: context of %d bytes, at most %d: %w", len(context), envelope.MaxContext, shredd.ErrTooLarge)
	}
	return nil
}

// sealTo is seal appending the envelope to dst.
func (s *Service) sealTo(ctx context.Context, dst []byte, src shredd.Source, plaintext, context []byte, done func(shredd.ID, []byte, int)) error {
	if err := checkSealable(plaintext, context); err != nil {
		return err
	}
	return s.withLineage(ctx, src, func(id shredd.ID, p *plan, keys []envelope.SubjectKey, refs []envelope.Ref) error {
		h, err := envelope.NewHeader(s.opts.Rand, envelope.ArtifactID(id), p.kind, refs)
		if err != nil {
			return fmt.Errorf("sealing: encrypt: %w: %w", shredd.ErrInvalid, err)
		}
		if need := len(plaintext) + 512 + len(refs)*40; cap(dst)-len(dst) < need {
			dst = slices.Grow(dst, need)
		}
		b, err := envelope.AppendSeal(dst, h, keys, plaintext, context)
		if err != nil {
			return fmt.Errorf("sealing: encrypt: %w", err)
		}
		if _, err := s.record(ctx, id, p, refs, true); err != nil {
			return err
		}
		done(id, b, len(refs))
		return nil
	})
}

// DataKey registers a new sealed artifact of src, with the checks of
// Encrypt (the barrier, the kind, forgotten parents), and returns its
// envelope header and artifact key: the caller seals one plaintext with them
// (envelope.SealWithKey) and gets the envelope Encrypt would have made. The
// key is returned only once the registration committed. It opens only this
// artifact's envelope: the subject keys never leave the service.
func (s *Service) DataKey(ctx context.Context, src shredd.Source) (shredd.DataKey, error) {
	out, errs := s.DataKeys(ctx, []shredd.Source{src})
	return out[0], errs[0]
}

// Register records a plaintext-held artifact: one that lives outside
// shredd (an in-memory ANN vector, a cached prompt) and that its holder must
// purge when a subject of its lineage is forgotten.
func (s *Service) Register(ctx context.Context, src shredd.Source) (shredd.Artifact, error) {
	if src.Holder == "" {
		return shredd.Artifact{}, fmt.Errorf("sealing: a plaintext-held artifact needs a holder: %w", shredd.ErrInvalid)
	}
	var out shredd.Artifact
	err := s.withLineage(ctx, src, func(id shredd.ID, p *plan, _ []envelope.SubjectKey, refs []envelope.Ref) error {
		at, err := s.record(ctx, id, p, refs, false)
		if err != nil {
			return err
		}
		out = shredd.Artifact{ID: id, Kind: p.kind, Holder: p.holder, Sealed: false, Parents: p.parents, Lineage: refs, CreatedAt: at}
		return nil
	})
	return out, err
}

// withLineage resolves src's lineage, takes the barrier read locks of its
// subjects, fetches their keys and a new artifact id, and runs fn with them
// under the locks: the common part of Encrypt and Register.
func (s *Service) withLineage(ctx context.Context, src shredd.Source, fn func(shredd.ID, *plan, []envelope.SubjectKey, []envelope.Ref) error) error {
	p, err := s.resolve(ctx, src, nil)
	if err != nil {
		return err
	}
	unlock := s.barrier.RLock(p.sids)
	defer unlock()
	keys, refs, id, err := s.keysAndID(ctx, p)
	if err != nil {
		return err
	}
	return fn(id, p, keys, refs)
}

// keysAndID fetches the keys of a resolved plan (planKeys), their refs,
// and a new artifact id. Called under the barrier read locks.
func (s *Service) keysAndID(ctx context.Context, p *plan) ([]envelope.SubjectKey, []envelope.Ref, shredd.ID, error) {
	keys, err := s.planKeys(ctx, p)
	if err != nil {
		return nil, nil, shredd.ID{}, err
	}
	refs := make([]envelope.Ref, len(keys))
	for i, k := range keys {
		refs[i] = k.Ref
	}
	id, err := s.newID()
	return keys, refs, id, err
}

// Decrypt opens a ciphertext for no named holder; see DecryptFor.
func (s *Service) Decrypt(ctx context.Context, ciphertext string, context []byte) (shredd.Opened, error) {
	return s.DecryptFor(ctx, ciphertext, context, "")
}

// DecryptFor opens a ciphertext with the keys of its lineage and context,
// and records a lease naming the holder that receives the plaintext. The
// lease is durable before the plaintext is returned, and both happen under
// the barrier: a forget either sees the lease or refuses the decrypt. A
// forgotten subject in the lineage gives ErrShredded.
func (s *Service) DecryptFor(ctx context.Context, ciphertext string, context []byte, holder string) (shredd.Opened, error) {
	if holder != "" && !shredd.ValidHolder(holder) {
		return shredd.Opened{}, fmt.Errorf("sealing: holder id: %w", shredd.ErrInvalid)
	}
	env, err := envelope.ParseText(ciphertext)
	if err != nil {
		return shredd.Opened{}, fmt.Errorf("sealing: decrypt: %w: %w", shredd.ErrEnvelope, err)
	}
	return s.open(ctx, env, context, holder)
}

// DecryptBinary is DecryptFor for the binary form of an envelope.
func (s *Service) DecryptBinary(ctx context.Context, ciphertext, context []byte, holder string) (shredd.Opened, error) {
	if holder != "" && !shredd.ValidHolder(holder) {
		return shredd.Opened{}, fmt.Errorf("sealing: holder id: %w", shredd.ErrInvalid)
	}
	env, err := envelope.Parse(ciphertext)
	if err != nil {
		return shredd.Opened{}, fmt.Errorf("sealing: decrypt: %w: %w", shredd.ErrEnvelope, err)
	}
	return s.open(ctx, env, context, holder)
}

func (s *Service) open(ctx context.Context, env *envelope.Envelope, context []byte, holder string) (shredd.Opened, error) {
	sids := env.Header.Subjects()
	unlock := s.barrier.RLock(sids)
	defer unlock()
	keys := make([]envelope.SubjectKey, 0, len(sids))
	for _, ref := range env.Header.Lineage {
		k, err := s.keys.KeyAt(ctx, ref)
		if err != nil {
			return shredd.Opened{}, s.keyErr(ctx, err, env.Header.Lineage)
		}
		keys = append(keys, k)
	}
	pt, err := envelope.Open(env, keys, context)
	if err != nil {
		return shredd.Opened{}, fmt.Errorf("sealing: decrypt: %w: %w", shredd.ErrEnvelope, err)
	}
	art := shredd.ID(env.Header.Artifact)
	// The envelope is authentic; the registry must know its artifact too.
	// One that it does not know was sealed after the backup the database
	// was restored from: no forget's dry run, cascade or proof can see it,
	// so it stays closed until it is registered again (Reregister).
	if err := s.checkRegistered(ctx, art); err != nil {
		clear(pt)
		return shredd.Opened{}, err
	}
	l, err := s.issueLease(ctx, art, holder, env.Header.Lineage)
	if err != nil {
		clear(pt)
		return shredd.Opened{}, err
	}
	return shredd.Opened{Artifact: art, Kind: env.Header.Kind, Plaintext: pt, Lease: l}, nil
}

// checkRegistered returns an error wrapping shredd.ErrUnknownArtifact when
// the registry holds no artifact id. Artifacts are never deleted, and an
// envelope is handed out only once its artifact committed, so the only
// way to an authentic envelope of an unknown artifact is a database older
// than the envelope.
func (s *Service) checkRegistered(ctx context.Context, id shredd.ID) error {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM artifacts WHERE id=?`, id[:]).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sealing: decrypt: artifact %s: %w: the database is probably older than the ciphertext "+
			"(restored from a backup taken before it was sealed); an operator can register it again from its envelope "+
			"(shredd reregister, POST /v1/artifacts/reregister)", id, shredd.ErrUnknownArtifact)
	}
	if err != nil {
		return fmt.Errorf("sealing: decrypt: %w", err)
	}
	return nil
}

// GetArtifact returns a registered artifact.
func (s *Service) GetArtifact(ctx context.Context, id shredd.ID) (shredd.Artifact, error) {
	a := shredd.Artifact{ID: id}
	var created int64
	err := s.db.QueryRowContext(ctx, `SELECT seq, kind, holder, sealed, created_at FROM artifacts WHERE id=?`, id[:]).
		Scan(&a.Seq, &a.Kind, &a.Holder, &a.Sealed, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return shredd.Artifact{}, fmt.Errorf("sealing: artifact %s: %w", id, shredd.ErrNotFound)
	}
	if err != nil {
		return shredd.Artifact{}, fmt.Errorf("sealing: artifact: %w", err)
	}
	a.CreatedAt = time.Unix(0, created).UTC()
	// Each statement reads the table and its staging table in one
	// snapshot (Settle moves whole artifacts between them).
	rows, err := s.db.QueryContext(ctx, `SELECT parent FROM artifact_parents WHERE artifact=?1 UNION ALL
		SELECT parent FROM parents_staged WHERE artifact=?1 ORDER BY 1`, id[:])
	if err != nil {
		return shredd.Artifact{}, fmt.Errorf("sealing: artifact: %w", err)
	}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return shredd.Artifact{}, err
		}
		var p shredd.ID
		copy(p[:], b)
		a.Parents = append(a.Parents, p)
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, `SELECT sid, gen FROM lineage WHERE artifact=?1 UNION ALL
		SELECT sid, gen FROM lineage_staged WHERE artifact=?1 ORDER BY 1`, id[:])
	if err != nil {
		return shredd.Artifact{}, fmt.Errorf("sealing: artifact: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		var r envelope.Ref
		if err := rows.Scan(&b, &r.Gen); err != nil {
			return shredd.Artifact{}, err
		}
		copy(r.SID[:], b)
		a.Lineage = append(a.Lineage, r)
	}
	return a, rows.Err()
}

var _ shredd.Sealer = (*Service)(nil)
