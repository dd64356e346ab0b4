// Package postgres is shredd's storage on PostgreSQL (pgx): many shredd
// nodes share one database. It opens a connection pool, brings the schema
// to this release's version with embedded, numbered migrations recorded in
// the database (one node at a time), and orders write transactions across
// every node with advisory locks: a transaction that declares nothing
// holds one global lock alone, as SQLite serialises writers in one file (a
// check and the write it guards never interleave with another writer's,
// on any node); transactions that declare the shards they touch
// (storage.TxOptions) hold that lock shared and lock only their shards.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL driver, database/sql interface

	"github.com/shredd/shredd/storage"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// writeLock is the key of the advisory lock every write transaction takes
// (pg_advisory_xact_lock; shared by the transactions that declare their
// shards); migrateLock the one around migrations; seqLock the sequence
// lock of the declaring transactions (Sequence).
const (
	writeLock   = 0x73687265_64640001 // "shredd" 1
	migrateLock = 0x73687265_64640002
	seqLock     = 0x73687265_64640003
)

// LockTimeout bounds the wait for the write lock, as the SQLite backend's
// write gate does: a writer that waits longer fails instead of queueing
// without end behind a stuck node.
const LockTimeout = 10 * time.Second

// Options tune Open.
type Options struct {
	// MaxConns bounds the connections of this node's pool (default 16, at
	// least 4: a migration, a cluster-wide lock and the listener each hold
	// one of their own while others run).
	MaxConns int
	// OpTimeout bounds each call of the database that comes with no
	// deadline of its own, and the wait of a request for a group commit
	// (storage.DB.Bound): the store timeout (default OpTimeout). The wait
	// for the write lock is bounded below it (at most LockTimeout, and two
	// thirds of it), so that it fails first, with its own error.
	OpTimeout time.Duration
}

// Open connects to the PostgreSQL database of dsn (a postgres:// URL or
// key=value string, as libpq takes) and migrates it.
func Open(ctx context.Context, dsn string, o Options) (*storage.DB, error) {
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	o.MaxConns = max(o.MaxConns, 4)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("storage: open postgres: %s", redact(err))
	}
	db.SetMaxOpenConns(o.MaxConns)
	db.SetMaxIdleConns(o.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("storage: open postgres: %s", redact(err))
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = OpTimeout
	}
	return storage.New(db, &engine{db: db, dsn: dsn, opTimeout: o.OpTimeout, lockTimeout: min(LockTimeout, o.OpTimeout*2/3)}), nil
}

// redact keeps a connection error's message without echoing a password
// the DSN may carry (pgx names the host and user, never the password; the
// URL parser's errors may quote the URL).
func redact(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "://") {
		return "cannot parse the connection string (check its syntax; not repeated here, it may hold a password)"
	}
	return msg
}

// SchemaVersion is the schema version this release migrates databases to.
func SchemaVersion() int {
	m, err := storage.LoadMigrations(migrationFiles, "migrations", nil)
	if err != nil || len(m) == 0 {
		return 0
	}
	return m[len(m)-1].Version
}

// migrate runs the migrations under a session advisory lock, so that nodes
// starting together apply each migration once.
func migrate(ctx context.Context, db *sql.DB) error {
	all, err := storage.LoadMigrations(migrationFiles, "migrations", nil)
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("storage: migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLock)); err != nil {
		return fmt.Errorf("storage: migrate: lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrateLock))
	return storage.Migrate(ctx, db, all, rebind)
}

// engine is the storage.Engine of PostgreSQL.
type engine struct {
	db          *sql.DB
	dsn         string // for the listener's own connection
	opTimeout   time.Duration
	lockTimeout time.Duration
}

func (e *engine) Name() string { return "postgres" }

func (e *engine) Rebind(q string) string { return rebind(q) }

// Shared is true: many nodes use one database.
func (e *engine) Shared() bool { return true }

// rebind numbers the ? placeholders of q ($1, $2, ...) and turns the
// numbered ones (?3) into $3, leaving those in quoted strings and
// identifiers alone.
func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			b.WriteByte('$')
			if i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
				continue // ?N is $N
			}
			n++
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Begin takes the cluster-wide write lock for the transaction: alone for a
// transaction that declares nothing (SQLite's semantics, one writer at a
// time seeing the last commit, which the rare paths rely on), shared for
// one that declares its shards, which then takes each shard's lock in
// ascending order (storage.TxOptions). Declaring transactions of
// different shards (or sharing theirs) run at once, on every node; each
// waits for an undeclared one, and an undeclared one for all of them.
// lock_timeout bounds every one of these waits.
func (e *engine) Begin(ctx context.Context, tx *sql.Tx, o storage.TxOptions) error {
	timeout := strconv.FormatInt(e.lockTimeout.Milliseconds(), 10)
	if len(o.Shards) == 0 {
		_, err := tx.ExecContext(ctx, `SELECT set_config('lock_timeout', $1, true), pg_advisory_xact_lock($2)`, timeout, int64(writeLock))
		return err
	}
	keys, err := shardKeys(o.Shards)
	if err != nil {
		return err
	}
	lock := `pg_advisory_xact_lock_shared`
	if o.Exclusive {
		lock = `pg_advisory_xact_lock`
	}
	// One statement, one round trip: PostgreSQL evaluates a target list
	// in order, so the timeout is set, then the write lock is taken
	// (shared), then the shards', each in the scalar subquery, whose ORDER
	// BY keeps it from being flattened: the locks are taken in ascending
	// order, so two declaring transactions never wait for each other in a
	// cycle.
	_, err = tx.ExecContext(ctx, `SELECT set_config('lock_timeout', $1, true), pg_advisory_xact_lock_shared($2),
		(SELECT count(`+lock+`(k)) FROM (SELECT k FROM unnest($3::bigint[]) AS u(k) ORDER BY k) s)`, timeout, int64(writeLock), keys)
	return err
}

// Sequence takes the sequence lock (storage.Tx.Sequence) alone until the
// transaction ends; lock_timeout, set by Begin, bounds the wait. Declaring
// transactions take it after their shards, and no transaction takes a
// shard after it, so the two kinds of lock never wait in a cycle.
func (e *engine) Sequence(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(seqLock))
	return err
}

// shardBase is the advisory lock key of shard 0; shard i is shardBase+i,
// away from writeLock and migrateLock and, as their bit 62 is set, from
// every lockKey.
const shardBase = 0x73687265_64650000 // "shredd" 2, then the shard

// shardKeys returns the advisory lock keys of shards, ascending, each
// once, in PostgreSQL's text form of a bigint array.
func shardKeys(shards []int) (string, error) {
	seen := make([]bool, storage.Shards)
	for _, sh := range shards {
		if sh < 0 || sh >= storage.Shards {
			return "", fmt.Errorf("storage: shard %d out of range [0, %d)", sh, storage.Shards)
		}
		seen[sh] = true
	}
	var b strings.Builder
	b.WriteByte('{')
	for sh, ok := range seen {
		if !ok {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(shardBase+int64(sh), 10))
	}
	b.WriteByte('}')
	return b.String(), nil
}

// LockedExec: a statement outside a transaction runs in one that holds
// the write lock, as every write does.
func (e *engine) LockedExec() bool { return true }

// lockKey maps a lock name to an advisory lock key (FNV-1a), away from
// writeLock and migrateLock.
func lockKey(name string) int64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return int64(h &^ (1 << 62)) // never equal to the fixed keys (their bit 62 is set)
}

// Exclusive holds a session advisory lock on a connection of its own
// until release, or until this process (or its connection) dies: then the
// server releases the lock and another node takes it.
func (e *engine) Exclusive(ctx context.Context, name string) (func(), error) {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("storage: lock %s: %w", name, err)
	}
	key := lockKey(name)
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		conn.Raw(func(any) error { return driver.ErrBadConn }) // the lock may be held: drop the connection
		conn.Close()
		return nil, fmt.Errorf("storage: lock %s: %w", name, err)
	}
	return func() {
		if _, err := conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, key); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}, nil
}

// Notify is pg_notify in tx: PostgreSQL delivers it at commit, in commit
// order.
func (e *engine) Notify(ctx context.Context, tx *sql.Tx, channel, payload string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
	return err
}

// Listen keeps a connection of its own LISTENing on channel, reconnecting
// after a failure (and then calling fn("", true): what was sent meanwhile
// is lost).
func (e *engine) Listen(ctx context.Context, channel string, fn func(string, bool)) error {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := e.listenOnce(ctx, channel, fn)
		if ctx.Err() != nil {
			break
		}
		_ = err // the caller sees the loss through fn; the next try logs nothing new
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
	return ctx.Err()
}

func (e *engine) listenOnce(ctx context.Context, channel string, fn func(string, bool)) error {
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	fn("", true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload, false)
	}
}

// OpTimeout is the default store timeout (Options.OpTimeout, shredd serve
// --store-timeout): each call without a deadline of its own fails after it,
// so that a server that stops answering fails requests with 503 instead of
// holding them. It is above LockTimeout, so that a wait for the write lock
// fails first, with its own error.
const OpTimeout = 15 * time.Second

func (e *engine) OpTimeout() time.Duration { return e.opTimeout }

func init() {
	// disk_full: the server could not extend a file. It also matches
	// the class 53 test below; this one makes it shredd.ErrDiskFull.
	storage.RegisterDiskFull(func(err error) bool {
		var pe *pgconn.PgError
		return errors.As(err, &pe) && pe.Code == "53100"
	})
	storage.RegisterUnavailable(func(err error) bool {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			// connection exceptions, shutdowns, too many connections, and
			// the write lock's timeout (lock_not_available)
			return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "53") || pe.Code == "55P03"
		}
		var ce *pgconn.ConnectError
		return errors.As(err, &ce) || pgconn.Timeout(err) || pgconn.SafeToRetry(err)
	})
}

// FlushPages does nothing: PostgreSQL copies its pages by itself.
func (e *engine) FlushPages(ctx context.Context) error { return nil }

// Scrub vacuums the key tables, so that the dead row versions that held
// destroyed keys leave their pages. What PostgreSQL keeps elsewhere (WAL
// segments until recycled, base backups, replicas) holds the wrapped keys
// only: they are wrapped under bucket keys that the re-key replaced and
// root versions the epoch destroyed (docs/scale-out.md).
func (e *engine) Scrub(ctx context.Context) error {
	for _, t := range []string{"subjects", "buckets"} {
		if _, err := e.db.ExecContext(ctx, `VACUUM `+t); err != nil {
			return fmt.Errorf("storage: vacuum %s: %w", t, err)
		}
	}
	return nil
}

// Sync commits one small write synchronously: PostgreSQL flushes the WAL
// in order, so every commit before it, those of a NoSync bulk load
// (synchronous_commit off) included, is durable when it returns.
func (e *engine) Sync(ctx context.Context) error {
	_, err := e.db.ExecContext(ctx, `INSERT INTO readiness(id, checked_at) VALUES (1, $1)
		ON CONFLICT(id) DO UPDATE SET checked_at=excluded.checked_at`, time.Now().UnixNano())
	return err
}

// Bulk turns synchronous_commit off for the load's connection with NoSync;
// CacheKiB has no per-connection meaning here.
func (e *engine) Bulk(ctx context.Context, conn *sql.Conn, o storage.BulkOptions) (func(context.Context) error, error) {
	if !o.NoSync && !o.Relaxed { // both: commits that do not wait for the WAL flush, in order
		return func(context.Context) error { return nil }, nil
	}
	if _, err := conn.ExecContext(ctx, `SET synchronous_commit = off`); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := conn.ExecContext(ctx, `RESET synchronous_commit`)
		return err
	}, nil
}
