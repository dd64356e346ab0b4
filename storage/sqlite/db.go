// Package sqlite is shredd's storage on SQLite: it opens the database file
// with the settings the key tree and the registry depend on, queues this
// process's writers behind one write gate, and brings the schema to this
// release's version with embedded, numbered migrations recorded in the
// database (table migrations).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3" // SQLite driver: the key tree and the registry share one file

	"github.com/shredd/shredd/storage"
)

// CacheKiB is the page cache of each connection in KiB (SQLite's default is
// 2 MiB): the registry's indexes are keyed by random ids, so each insert
// touches its own pages, and a cache miss is a read system call. At most
// MaxConns connections are open, and all their caches together stay near
// HeapLimitKiB.
const CacheKiB = 32 << 10

// MaxConns bounds the connections of the pool, open or idle.
const MaxConns = 8

// StmtCache is the number of prepared statements each connection keeps
// for its queries run by text (the driver prepares every other query
// afresh): the hot readers (a subject's key row, a forget's answer) run the
// same few statements, and preparing one costs about as much as running it.
// Statements are reset and their parameters cleared when they go back.
const StmtCache = 64

// driverName is the SQLite driver with shredd's per-connection settings.
const driverName = "sqlite3-shredd"

var registerDriver sync.Once

// WALAutoCheckpoint is the size of the WAL, in pages, at which a committing
// connection checkpoints by itself. SQLite's default (1,000 pages) makes
// the commit that crosses it copy the WAL into the database file and fsync
// it before returning: under load that is most commits of the registry's
// group commits, each copying the same hot index pages again. shredd's
// registry checkpoints in the background after its own commits
// (storage.DB.FlushPages, at most every 50 ms), but the commit that crosses
// this bound is still what starts the WAL again under a stream of writes
// (a checkpoint beside the writers never copies what they committed while
// it ran), and forgets and re-keys ask for no background checkpoint: that
// commit copies what is left while every writer waits behind it. Under a
// stream of forgets and re-keys (about 10,000 pages a second at 1M
// subjects) 10,000 pages made that wait 40 to 100 ms about once a second,
// which was about half the forgets past 10 ms. At 20,000 it comes half as
// often and lasts up to about 70 ms, and the copies, of the same hot pages,
// are fewer; 40,000 gave the same p99 and a p99.9 of 100 ms
// (docs/performance-archive.md, "Rarer checkpoints in the commit path"). Copying in
// the background after every writer's commits instead was measured and is
// slower: its fsyncs of the database file delay the commits' own. The WAL
// file keeps its largest size: up to about 80 MiB at 4 KiB pages.
const WALAutoCheckpoint = 20_000

// Open opens (creating if needed) the SQLite database at path with the
// settings shredd depends on, checks that they took effect, and migrates
// the schema (Migrate):
//
//   - WAL journal with synchronous=FULL: a commit is durable when it returns,
//     so a crash never loses a committed forget;
//   - secure_delete=ON: deleted rows (destroyed key bytes) are overwritten
//     with zeros instead of lingering in free pages;
//   - immediate transactions: writers take the write lock at BEGIN, so
//     check-then-write sequences cannot interleave;
//   - foreign keys on and a busy timeout for writers of other processes;
//     the writers of this process queue in arrival order behind one write
//     gate per file (writeGate) instead of polling SQLite's lock;
//   - automatic WAL checkpoints only past WALAutoCheckpoint pages: the
//     service flushes them in the background (storage.DB.FlushPages);
//   - SQLite's heap in the process, its connections' page caches, held
//     near HeapLimitKiB.
func Open(path string) (*storage.DB, error) {
	// Create the file 0600 first: SQLite gives its -wal and -shm files the
	// database file's permissions.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("storage: open db: %w", err)
	}
	f.Close()
	setHeapLimit(0)
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_secure_delete", "on")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", "10000")
	q.Set("_txlock", "immediate")
	q.Set("_cache_size", strconv.Itoa(-CacheKiB))
	q.Set("_stmt_cache_size", strconv.Itoa(StmtCache))
	// The path is part of a file: URI: escape what URIs give a meaning to.
	uriPath := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	registerDriver.Do(func() {
		sql.Register(driverName, &gatedDriver{inner: &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint=%d", WALAutoCheckpoint), nil)
			return err
		}}})
	})
	db, err := sql.Open(driverName, "file:"+uriPath+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("storage: open db: %w", err)
	}
	// Idle connections stay open (database/sql keeps 2 by default): one
	// closed on release is opened again by the next reader, which reads
	// the schema, prepares its statements afresh and starts with a cold
	// page cache; at 1M subjects that was a fifth of a forget's CPU.
	// Connections idle for a minute close, and their caches with them.
	db.SetMaxOpenConns(MaxConns)
	db.SetMaxIdleConns(MaxConns)
	db.SetConnMaxIdleTime(time.Minute)
	ctx := context.Background()
	var mode string
	var sd, ac int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&ac); err != nil {
		db.Close()
		return nil, fmt.Errorf("storage: open db: %w", err)
	}
	if ac != WALAutoCheckpoint {
		db.Close()
		return nil, fmt.Errorf("storage: open db: wal_autocheckpoint=%d, want %d", ac, WALAutoCheckpoint)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("storage: open db: %w", err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA secure_delete").Scan(&sd); err != nil {
		db.Close()
		return nil, fmt.Errorf("storage: open db: %w", err)
	}
	if mode != "wal" || sd != 1 {
		db.Close()
		return nil, fmt.Errorf("storage: open db: journal_mode=%s secure_delete=%d, want wal and 1", mode, sd)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return storage.New(db, &engine{db: db}), nil
}

// checkpointPassive copies what it can of the WAL into the database file
// without waiting for readers or writers (PRAGMA wal_checkpoint(PASSIVE)):
// the background checkpoint of a busy database, off the commit path.
func checkpointPassive(ctx context.Context, db *sql.DB) error {
	var busy, logPages, moved int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &moved); err != nil {
		return fmt.Errorf("storage: wal checkpoint: %w", err)
	}
	return nil
}

// checkpointTruncate copies the WAL into the database file and truncates it, so
// that pages holding destroyed keys do not stay in the WAL file. Readers in
// flight can keep a checkpoint from completing; it is retried for up to
// about ten seconds before giving up.
func checkpointTruncate(ctx context.Context, db *sql.DB) error {
	delay := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var busy, logPages, moved int
		if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &moved); err != nil {
			return fmt.Errorf("storage: wal checkpoint: %w", err)
		}
		if busy == 0 && moved == logPages {
			return nil
		}
		if attempt == 40 {
			return fmt.Errorf("storage: wal checkpoint: database still busy after %d attempts", attempt+1)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

func init() {
	// The write gate's and SQLite's own lock timeouts: busy, not broken.
	storage.RegisterUnavailable(func(err error) bool {
		var se sqlite3.Error
		return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
	})
	// A full disk (SQLITE_FULL), a write or sync the OS refused
	// (SQLITE_IOERR: ENOSPC, EDQUOT or EROFS underneath) or a read-only
	// file system (SQLITE_READONLY): the write may succeed later.
	storage.RegisterDiskFull(func(err error) bool {
		var se sqlite3.Error
		if !errors.As(err, &se) {
			return false
		}
		switch se.SystemErrno {
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS:
			return true
		}
		return se.Code == sqlite3.ErrFull || se.Code == sqlite3.ErrIoErr || se.Code == sqlite3.ErrReadonly
	})
}

// engine is the storage.Engine of SQLite.
type engine struct{ db *sql.DB }

func (e *engine) Name() string { return "sqlite" }

// Shared is false: one process owns the file (the data directory's lock).
func (e *engine) Shared() bool { return false }

// Rebind leaves queries as written: SQLite takes ? placeholders.
func (e *engine) Rebind(q string) string { return q }

// Begin does nothing: BEGIN IMMEDIATE (behind the write gate) took the
// lock, and one writer at a time is what a declaring transaction needs
// too: its shards change nothing.
func (e *engine) Begin(context.Context, *sql.Tx, storage.TxOptions) error { return nil }

// LockedExec is false: the write gate queues statements outside a
// transaction too.
func (e *engine) LockedExec() bool { return false }

// Exclusive returns at once: one process owns the file (the data
// directory's lock), and its own mutexes order its work.
func (e *engine) Exclusive(context.Context, string) (func(), error) { return func() {}, nil }

// Notify does nothing: no other process shares the file.
func (e *engine) Notify(context.Context, *sql.Tx, string, string) error { return nil }

// Listen returns at once: no other process shares the file.
func (e *engine) Listen(context.Context, string, func(string, bool)) error { return nil }

// OpTimeout is 0: the file is local, and the write gate bounds the wait
// for the write lock (10 s).
func (e *engine) OpTimeout() time.Duration { return 0 }

// FlushPages is a PASSIVE checkpoint of SQLite's write-ahead log.
func (e *engine) FlushPages(ctx context.Context) error { return checkpointPassive(ctx, e.db) }

// Scrub copies the WAL into the database file and truncates it: the
// frames that held deleted rows are gone, and secure_delete (set at Open)
// has already zeroed the freed space in the pages themselves.
func (e *engine) Scrub(ctx context.Context) error { return checkpointTruncate(ctx, e.db) }

// Sync copies the WAL into the database file, fsyncs it (the checkpointing
// connection syncs: synchronous=FULL) and truncates the WAL.
func (e *engine) Sync(ctx context.Context) error { return checkpointTruncate(ctx, e.db) }

// Bulk sizes conn's page cache and, with NoSync, turns its fsyncs off
// until restore; with Relaxed, its commits do not wait for an fsync.
func (e *engine) Bulk(ctx context.Context, conn *sql.Conn, o storage.BulkOptions) (func(context.Context) error, error) {
	var undo []string
	var raised int64 // KiB added to the heap limit
	restore := func(ctx context.Context) error {
		setHeapLimit(-raised)
		raised = 0
		var first error
		for _, q := range undo {
			if _, err := conn.ExecContext(ctx, q); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	set := func(q, back string) error {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			restore(context.WithoutCancel(ctx))
			return err
		}
		undo = append(undo, back)
		return nil
	}
	if o.CacheKiB > 0 {
		if err := set(fmt.Sprintf("PRAGMA cache_size=-%d", o.CacheKiB), fmt.Sprintf("PRAGMA cache_size=-%d", CacheKiB)); err != nil {
			return nil, err
		}
		raised = int64(o.CacheKiB)
		setHeapLimit(raised)
	}
	switch {
	case o.NoSync:
		if err := set("PRAGMA synchronous=OFF", "PRAGMA synchronous=FULL"); err != nil {
			return nil, err
		}
	case o.Relaxed:
		// In WAL mode, NORMAL syncs the WAL only at checkpoints: commits
		// stay in order and the file is never torn.
		if err := set("PRAGMA synchronous=NORMAL", "PRAGMA synchronous=FULL"); err != nil {
			return nil, err
		}
	}
	return restore, nil
}
