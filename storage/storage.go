// Package storage is the seam between shredd's packages and the database
// engine: a DB and its transactions, over which every package runs its
// queries, written once with ? placeholders in the SQL every backend accepts.
//
// A backend is one package below this one (storage/sqlite, storage/postgres) that opens
// its engine, brings the schema to this release's version with its
// embedded, numbered migrations, and hands the result to New with an
// Engine: the few things that differ between engines (placeholders, how
// freed pages leave the disk, bulk-load settings). No other package sees a
// *sql.DB or a *sql.Tx: they take a *DB, a *Tx or a Querier.
package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// ErrDBUnavailable means the database did not answer in time or could not
// be reached: the request was not carried out, and may be tried again.
// Unavailable recognises it and the engines' own forms of it.
var ErrDBUnavailable = errors.New("database unavailable")

// Unavailable reports whether err says the database is unavailable (as
// opposed to refusing the statement): ErrDBUnavailable, a deadline passed, a
// broken connection, or what an engine registered (RegisterUnavailable).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrDBUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	for _, f := range unavailable {
		if f(err) {
			return true
		}
	}
	return false
}

var unavailable []func(error) bool

// RegisterUnavailable adds an engine's test for errors that say its
// database is unavailable; backends call it from init.
func RegisterUnavailable(f func(error) bool) { unavailable = append(unavailable, f) }

// ErrDiskFull means the disk is full or read-only: retry later. It is the
// database's form of shredd.ErrDiskFull (package storage sits below the
// root package, which it cannot import); api maps both to 503.
var ErrDiskFull = errors.New("the disk is full or read-only: retry later")

// DiskFull reports whether err says a disk the database writes to is full
// or read-only (ErrDiskFull): ENOSPC, EDQUOT or EROFS anywhere in
// its chain, or what an engine registered (RegisterDiskFull: SQLite's
// SQLITE_FULL and I/O errors, PostgreSQL's disk_full). Such a write may
// succeed later, once space is freed: the API answers 503 with
// Retry-After, not 500.
func DiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrDiskFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS) {
		return true
	}
	for _, f := range diskFull {
		if f(err) {
			return true
		}
	}
	return false
}

var diskFull []func(error) bool

// RegisterDiskFull adds an engine's test for errors that say its disk is
// full or read-only; backends call it from init.
func RegisterDiskFull(f func(error) bool) { diskFull = append(diskFull, f) }

// Failures answers DiskFull and Unavailable as methods, for a layer that
// asks through an interface (api.Failures) rather than import storage.
type Failures struct{}

// DiskFull is the package's DiskFull.
func (Failures) DiskFull(err error) bool { return DiskFull(err) }

// Unavailable is the package's Unavailable.
func (Failures) Unavailable(err error) bool { return Unavailable(err) }

// wrapFull wraps an error that DiskFull recognises in ErrDiskFull,
// so that callers above test it with errors.Is.
func wrapFull(err error) error {
	if err == nil || errors.Is(err, ErrDiskFull) || !DiskFull(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrDiskFull, err)
}

// ErrSchemaTooNew means the database was migrated by a newer release of
// shredd than this one: opening it could misread what that release wrote.
var ErrSchemaTooNew = errors.New("database schema newer than this release")

// An Engine is what a backend tells the DB about its database engine.
type Engine interface {
	// Name names the engine ("sqlite").
	Name() string
	// Rebind turns a query written with ? placeholders into the engine's
	// own (the query as written when the engine takes ?).
	Rebind(query string) string
	// Shared reports whether other processes may use the database at the
	// same time (and so Exclusive, Notify and Listen reach them).
	Shared() bool
	// Begin runs at the start of every transaction, before its first
	// statement: it takes the engine's write lock where the engine needs a
	// statement for that (SQLite takes it with BEGIN IMMEDIATE), or, for a
	// transaction that declares what it touches (o.Shards not empty), the
	// locks of those shards only, where the engine has them (TxOptions).
	Begin(ctx context.Context, tx *sql.Tx, o TxOptions) error
	// LockedExec reports whether a statement outside a transaction must
	// run in one (with Begin) to queue behind the write lock.
	LockedExec() bool
	// Exclusive takes the cluster-wide lock called name and returns its
	// release: held by one process of all that share the database, until
	// released or until that process dies. Engines whose database one
	// process owns (SQLite) return at once.
	Exclusive(ctx context.Context, name string) (release func(), err error)
	// Notify sends payload to every listener of channel when tx commits
	// (nothing when it rolls back).
	Notify(ctx context.Context, tx *sql.Tx, channel, payload string) error
	// Listen calls fn with each payload sent to channel by any process
	// until ctx ends; fn("", true) says that notifications may have been
	// lost (the listener reconnected), and is called once first, when the
	// listener starts. Engines without other processes return at once.
	Listen(ctx context.Context, channel string, fn func(payload string, lost bool)) error
	// OpTimeout bounds each call of the DB that comes with no deadline of
	// its own (a transaction from its start to its end), so that a database
	// that stops answering fails the call instead of holding it; 0 for
	// none (SQLite: a local file, and its write gate has its own bound).
	OpTimeout() time.Duration
	// FlushPages copies the pages the engine's own write-ahead log holds
	// into the database file without blocking readers or writers, where
	// the engine has such a log that it does not copy by itself (SQLite's
	// checkpoint). Errors may be left to the next call.
	FlushPages(ctx context.Context) error
	// Scrub makes sure no file of the database keeps the bytes of rows
	// deleted or overwritten before the call (a write-ahead log, free
	// pages): the epoch calls it after it destroys keys, so that the rows
	// of forgotten subjects are gone from the disk, not only from the
	// tables.
	Scrub(ctx context.Context) error
	// Sync makes every commit so far durable, those of a NoSync bulk load
	// too.
	Sync(ctx context.Context) error
	// Bulk prepares conn for a bulk load with o and returns the function
	// that restores its settings; the connection is discarded when that
	// function fails.
	Bulk(ctx context.Context, conn *sql.Conn, o BulkOptions) (restore func(context.Context) error, err error)
	// CheckSchema compares the database's schema objects (tables and their
	// columns, indexes, views, triggers; on engines that have them, rules,
	// policies and functions) with those a fresh migration to the
	// database's recorded version makes, and returns nil when they are
	// the same, or an error wrapping ErrSchemaAltered that names what
	// differs (CompareSchema). It writes nothing that outlives the call.
	CheckSchema(ctx context.Context) error
}

// Shards is the number of lock shards of TxOptions: subjects map to them
// by ranges of key-tree buckets (keystore.Tree.ShardOf), so that a shard
// is a set of whole buckets.
const Shards = 256

// AllShards returns every shard, for a transaction that may touch any
// subject's rows and declares them all shared (the settling of staged
// lineage): it excludes no registration, and any writer that takes a
// shard exclusively excludes it.
func AllShards() []int {
	all := make([]int, Shards)
	for i := range all {
		all[i] = i
	}
	return all
}

// TxOptions declares what a transaction touches (DB.BeginTouching), so
// that an engine that many processes share locks only that instead of the
// whole database. The zero value declares nothing: the transaction takes
// the database's write lock alone, as BeginTx does.
//
// On PostgreSQL a declaring transaction takes the global write lock shared
// (pg_advisory_xact_lock_shared), then each of its shards in ascending
// order (so two declaring transactions never deadlock), shared or, with
// Exclusive, alone; an undeclared transaction takes the global lock alone
// and so waits for every declaring one and excludes them all. A declaring
// transaction must not depend on being the only writer: what it reads of
// the subjects of its shards is ordered against the writers of those
// subjects (who take the shards exclusively, or declare nothing), but any
// other transaction of its kind may commit beside it. So it must not
// assign a number as max()+1, advance a watermark (a "last sequence"), or
// append to the transparency log, except under the sequence lock
// (Tx.Sequence: the log's appends and the evictions take it themselves);
// identity columns and inserts of rows with fresh random ids are safe.
//
// Who declares today (docs/scale-out.md, "What holds across nodes"):
// registrations and decrypt leases, with their lineage's shards, shared.
// They check the lineage subjects live and insert rows under fresh ids,
// nothing else. The settling of staged lineage (registry.Settle) declares
// every shard shared: it moves rows of any subject, each chunk in one
// statement per table (DELETE ... RETURNING feeding the INSERT, one
// snapshot), so that a registration committing beside it is either moved
// whole or left staged for the next chunk.
//
// A forget declares its subjects' shards, exclusively (erasure's group
// commit): its commit records the barrier as the newest registration's
// sequence number, which is exact for its own subjects (a registration
// carrying one of them holds that shard, so it committed before or sees
// the subject forgotten) though registrations of other shards may commit
// beside it. What a forget numbers in commit order (its evictions, its
// transparency log entries) it numbers under the sequence lock
// (Tx.Sequence), which it takes last and holds to its commit. A bucket's
// re-key declares the bucket's shard exclusively: the subjects of a
// bucket are of one shard (keystore.Tree.ShardOf). The creation of a
// subject's key declares its shard, shared, and logs under the sequence
// lock too. Epochs, bulk key creation, kinds, holders, tokens and the
// nodes' heartbeats stay undeclared (rare, or one small row a second).
// Each shard held is an entry of PostgreSQL's lock table
// (max_locks_per_transaction × max_connections entries): a group of
// registrations holds at most Shards of them.
type TxOptions struct {
	// Shards are the shards, in [0, Shards), of the subjects whose state
	// the transaction reads or writes: duplicates and order do not matter.
	Shards []int
	// Exclusive takes each shard alone; otherwise shared with the other
	// transactions that declare it shared.
	Exclusive bool
}

// A sequencer is an Engine on which declaring transactions commit side by
// side (PostgreSQL): Sequence takes, in tx, the lock that keeps what such
// transactions number in commit order (Tx.Sequence).
type sequencer interface {
	Sequence(ctx context.Context, tx *sql.Tx) error
}

// Sequence takes the database's sequence lock for the rest of the
// transaction, before it numbers anything that readers consume in order
// (transparency log entries, evictions): a number taken under it belongs
// to a transaction that commits before any transaction that takes the
// lock after it, so a reader that has seen number n has seen every number
// below it that commits. A transaction that declares nothing holds the
// write lock alone, which orders it already, and so does every
// transaction on an engine of one writer (SQLite): Sequence does nothing
// there. It is idempotent; callers take it as late as they can, as it
// serialises the declaring transactions that take it.
func (t *Tx) Sequence(ctx context.Context) error {
	if !t.declared || t.sequenced {
		return nil
	}
	sq, ok := t.d.eng.(sequencer)
	if !ok {
		return nil
	}
	if err := sq.Sequence(t.stmt(ctx), t.tx); err != nil {
		return t.wrap(err)
	}
	t.sequenced = true
	return nil
}

// BulkOptions tunes a bulk load (DB.Bulk). The zero value changes nothing.
type BulkOptions struct {
	// CacheKiB sizes the page cache of the load's connection (0: the
	// default).
	CacheKiB int
	// NoSync commits without waiting for the disk: only for filling a data
	// directory that nothing serves yet, which a crash may leave torn;
	// DB.Sync makes it durable afterwards.
	NoSync bool
	// Relaxed commits without waiting for the disk, in order: a crash of
	// the machine may lose the transaction, and then every one committed
	// after it too, but never leaves the database torn, and the next
	// durable commit of any connection makes it durable. For work that
	// resumes from whatever it committed (a bucket re-key's chunks):
	// SQLite's synchronous=NORMAL in WAL mode, PostgreSQL's
	// synchronous_commit=off.
	Relaxed bool
	// Tx declares what the load's transaction touches (TxOptions); the
	// zero value declares nothing, as for BeginTx.
	Tx TxOptions
}

// A Querier is a *DB or a *Tx: what a read or a single write needs.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DB is an open database of one backend.
type DB struct {
	db         *sql.DB
	eng        Engine
	rebind     func(string) string // nil: queries go as written
	lockedExec bool
	timeout    time.Duration
}

// New wraps db, opened and migrated by a backend, with the backend's engine.
// Only backends call it.
func New(db *sql.DB, eng Engine) *DB {
	d := &DB{db: db, eng: eng, lockedExec: eng.LockedExec(), timeout: eng.OpTimeout()}
	if eng.Rebind("?") != "?" {
		d.rebind = eng.Rebind
	}
	return d
}

// bound gives ctx the DB's OpTimeout when it has no deadline; cancel
// releases it.
func (d *DB) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.timeout <= 0 {
		return ctx, func() {}
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d.timeout)
}

// boundRows is bound for a call whose result outlives it (rows read
// later): the deadline is released after it passed, not before (so that a
// call that runs out sees DeadlineExceeded, not Canceled).
func (d *DB) boundRows(ctx context.Context) context.Context {
	ctx, cancel := d.bound(ctx)
	if d.timeout > 0 {
		time.AfterFunc(d.timeout+time.Second, cancel)
	}
	return ctx
}

func (d *DB) q(query string) string {
	if d.rebind == nil {
		return query
	}
	return d.rebind(query)
}

// Engine returns the backend's engine (a backend type-asserts its own, for
// the operations only it has, such as the SQLite backup).
func (d *DB) Engine() Engine { return d.eng }

// ExecContext runs a statement outside a transaction (one statement is its
// own transaction).
func (d *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if !d.lockedExec {
		ctx, cancel := d.bound(ctx)
		defer cancel()
		res, err := d.db.ExecContext(ctx, d.q(query), args...)
		return res, wrapFull(err)
	}
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return res, tx.Commit()
}

// QueryContext runs a query outside a transaction. A query that writes
// (INSERT ... RETURNING) belongs in a transaction: outside one it would
// not queue behind the write lock.
func (d *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return d.db.QueryContext(d.boundRows(ctx), d.q(query), args...)
}

// QueryRowContext runs a query of at most one row outside a transaction.
func (d *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return d.db.QueryRowContext(d.boundRows(ctx), d.q(query), args...)
}

// BeginTx starts a transaction. A transaction that may write must say so
// before its first statement: it takes the write lock of the database at
// its start (SQLite: BEGIN IMMEDIATE behind the process's write gate), so
// concurrent writers queue instead of failing at commit. It excludes every
// other writer, declaring or not, on every node: the rare paths (epochs,
// re-keys, forgets, key creation, holders, admin, migrations) rely on it.
func (d *DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	return d.begin(ctx, opts, TxOptions{})
}

// BeginTouching starts a transaction that declares what it touches (o):
// on an engine shared by many processes (PostgreSQL) it excludes only the
// transactions that take one of its shards exclusively and those that
// declare nothing (BeginTx), so that declaring transactions of different
// nodes commit in parallel. Without shards it is BeginTx. On SQLite, one
// writer at a time, it is BeginTx too.
func (d *DB) BeginTouching(ctx context.Context, o TxOptions) (*Tx, error) {
	return d.begin(ctx, nil, o)
}

func (d *DB) begin(ctx context.Context, opts *sql.TxOptions, o TxOptions) (*Tx, error) {
	ctx, cancel := d.bound(ctx)
	tx, err := d.db.BeginTx(ctx, opts)
	if err != nil {
		cancel()
		return nil, wrapFull(err)
	}
	if err := d.eng.Begin(ctx, tx, o); err != nil {
		tx.Rollback()
		cancel()
		return nil, wrapFull(err)
	}
	return &Tx{tx: tx, d: d, ctx: ctx, cancel: cancel, declared: len(o.Shards) > 0}, nil
}

// Bound gives ctx the store timeout (Engine.OpTimeout) when it has none of
// its own, for a wait that is no call of the DB: a request's wait for the
// group commit that writes its registration or lease. cancel releases it.
// Without a store timeout (SQLite) ctx is returned as it is.
func (d *DB) Bound(ctx context.Context) (context.Context, context.CancelFunc) { return d.bound(ctx) }

// Bulk runs fn in one transaction on a connection of its own tuned with o
// for a bulk load, and commits it when fn returns nil.
func (d *DB) Bulk(ctx context.Context, o BulkOptions, fn func(*Tx) error) (err error) {
	defer func() { err = wrapFull(err) }()
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	restore, err := d.eng.Bulk(ctx, conn, o)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := restore(context.WithoutCancel(ctx)); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			if err == nil {
				err = rerr
			}
		}
	}()
	stx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := d.eng.Begin(ctx, stx, o.Tx); err != nil {
		stx.Rollback()
		return err
	}
	tx := &Tx{tx: stx, d: d, declared: len(o.Tx.Shards) > 0}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Exclusive takes the cluster-wide lock called name (Engine.Exclusive).
func (d *DB) Exclusive(ctx context.Context, name string) (func(), error) {
	return d.eng.Exclusive(ctx, name)
}

// Notify sends payload to channel's listeners when tx commits
// (Engine.Notify).
func (t *Tx) Notify(ctx context.Context, channel, payload string) error {
	return t.d.eng.Notify(ctx, t.tx, channel, payload)
}

// Listen calls fn with what is sent to channel (Engine.Listen).
func (d *DB) Listen(ctx context.Context, channel string, fn func(payload string, lost bool)) error {
	return d.eng.Listen(ctx, channel, fn)
}

// Shared reports whether other processes may share the database
// (Engine.Shared): false for SQLite.
func (d *DB) Shared() bool { return d.eng.Shared() }

// FlushPages copies the pages of the engine's write-ahead log into the
// database file in the background of writers (Engine.FlushPages). The
// word "checkpoint" is the transparency log's (translog.Checkpoint).
func (d *DB) FlushPages(ctx context.Context) error { return d.eng.FlushPages(ctx) }

// Scrub makes sure the bytes of deleted rows are gone from every file of
// the database (Engine.Scrub).
func (d *DB) Scrub(ctx context.Context) error { return d.eng.Scrub(ctx) }

// Sync makes every commit so far durable, those of a NoSync bulk load too
// (Engine.Sync).
func (d *DB) Sync(ctx context.Context) error { return d.eng.Sync(ctx) }

// ProbeWrite checks that the database accepts a write now: it upserts the
// one row of the readiness table, through the write lock like every other
// write, and commits it. A database that only reads (a full disk, a
// read-only file or mount, a closed handle, a write lock that stays taken
// until ctx ends) gives an error; reads alone would not show it. Each call
// is one small committed transaction (one fsync): meant for readiness
// probes every few seconds, not for hot paths.
func (d *DB) ProbeWrite(ctx context.Context, now time.Time) error {
	if _, err := d.ExecContext(ctx, `INSERT INTO readiness(id, checked_at) VALUES (1, ?)
		ON CONFLICT(id) DO UPDATE SET checked_at=excluded.checked_at`, now.UnixNano()); err != nil {
		return fmt.Errorf("storage: probe write: %w", err)
	}
	return nil
}

// SetMaxOpenConns bounds the connections of the pool (tests use 1 to hold
// the only connection).
func (d *DB) SetMaxOpenConns(n int) { d.db.SetMaxOpenConns(n) }

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Tx is a transaction of a DB.
type Tx struct {
	tx     *sql.Tx
	d      *DB
	ctx    context.Context    // the transaction's own, with its deadline (BeginTx); nil for none
	cancel context.CancelFunc // releases the transaction's deadline; nil for none
	// declared: the transaction declared shards (TxOptions), so writers of
	// other shards may commit beside it; sequenced: it holds the sequence
	// lock (Sequence).
	declared, sequenced bool
}

// stmt is the context of a statement of the transaction: ctx, or the
// transaction's own when ctx has no deadline. A statement of a group
// commit (run with context.Background) on a server that stopped answering
// otherwise waited for the server, past the transaction's deadline: the
// deadline rolls the transaction back only once the statement returns.
func (t *Tx) stmt(ctx context.Context) context.Context {
	if t.ctx == nil {
		return ctx
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx
	}
	return t.ctx
}

// wrap gives err, the error of a statement or of the commit, the
// transaction's timeout: a transaction that its deadline rolled back
// answers sql.ErrTxDone to what follows, and that is the database not
// answering in time (ErrDBUnavailable), not a bug.
func (t *Tx) wrap(err error) error {
	if err == nil {
		return nil
	}
	if t.ctx != nil && t.ctx.Err() != nil && !Unavailable(err) {
		return fmt.Errorf("%w: %w: %w", ErrDBUnavailable, t.ctx.Err(), err)
	}
	return wrapFull(err)
}

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := t.tx.ExecContext(t.stmt(ctx), t.d.q(query), args...)
	return res, t.wrap(err)
}

// QueryContext runs a query in the transaction.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := t.tx.QueryContext(t.stmt(ctx), t.d.q(query), args...)
	return rows, t.wrap(err)
}

// QueryRowContext runs a query of at most one row in the transaction.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(t.stmt(ctx), t.d.q(query), args...)
}

// PrepareContext prepares a statement for repeated use in the transaction;
// the statement is closed with it.
func (t *Tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	st, err := t.tx.PrepareContext(t.stmt(ctx), t.d.q(query))
	return st, t.wrap(err)
}

// Commit commits the transaction.
func (t *Tx) Commit() error {
	err := t.wrap(t.tx.Commit())
	t.release()
	return err
}

// Rollback rolls the transaction back; after a Commit it does nothing
// (it returns sql.ErrTxDone), so it can be deferred.
func (t *Tx) Rollback() error {
	err := t.tx.Rollback()
	t.release()
	return err
}

func (t *Tx) release() {
	if t.cancel != nil {
		t.cancel()
	}
}
