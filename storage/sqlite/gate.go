package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"
)

// gateTimeout bounds the wait for the write gate, as the busy timeout
// bounds the wait for SQLite's own write lock.
const gateTimeout = 10 * time.Second

// writeGate hands this process's write lock of one database file to its
// connections one at a time, in arrival order (a channel's senders are
// served first come, first served).
//
// Without it, the connections of one process that want to write at the same
// time all wait in SQLite's busy handler, which polls with sleeps growing to
// 100 ms and serves whoever polls first: behind a long transaction (a bucket
// re-key) a forget's commit could wait several of those sleeps and lose the
// lock to later arrivals, which is the tail of forget latency under load.
// Behind the gate a writer waits only for the writers queued before it.
// SQLite's busy timeout still applies between processes.
type writeGate struct{ ch chan struct{} }

func (g *writeGate) acquire(ctx context.Context) error {
	select {
	case g.ch <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(gateTimeout)
	defer t.Stop()
	select {
	case g.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("storage: write lock: %w", sqlite3.Error{Code: sqlite3.ErrBusy})
	}
}

func (g *writeGate) release() { <-g.ch }

// gates holds one write gate per data source name: every connection of the
// process to one database file shares it.
var gates sync.Map // string -> *writeGate

// gatedDriver is the SQLite driver whose connections take the write gate
// for each transaction (they all begin IMMEDIATE: a transaction is a write)
// and for each statement run outside a transaction.
type gatedDriver struct{ inner *sqlite3.SQLiteDriver }

func (d *gatedDriver) Open(name string) (driver.Conn, error) {
	c, err := d.inner.Open(name)
	if err != nil {
		return nil, err
	}
	g, _ := gates.LoadOrStore(name, &writeGate{ch: make(chan struct{}, 1)})
	return &gatedConn{SQLiteConn: c.(*sqlite3.SQLiteConn), gate: g.(*writeGate)}, nil
}

// gatedConn is a SQLite connection behind its file's write gate. The
// embedded connection provides everything else (queries, prepared
// statements, pings).
type gatedConn struct {
	*sqlite3.SQLiteConn
	gate *writeGate
	inTx bool // a transaction of this connection holds the gate
}

func (c *gatedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.gate.acquire(ctx); err != nil {
		return nil, err
	}
	tx, err := c.SQLiteConn.BeginTx(ctx, opts)
	if err != nil {
		c.gate.release()
		return nil, err
	}
	c.inTx = true
	return &gatedTx{Tx: tx, c: c}, nil
}

// ExecContext runs a statement; outside a transaction it may write
// (autocommit), so it takes the gate for its duration.
func (c *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.inTx {
		return c.SQLiteConn.ExecContext(ctx, query, args)
	}
	if err := c.gate.acquire(ctx); err != nil {
		return nil, err
	}
	defer c.gate.release()
	return c.SQLiteConn.ExecContext(ctx, query, args)
}

// gatedTx releases the gate when the transaction ends, whatever the outcome.
type gatedTx struct {
	driver.Tx
	c    *gatedConn
	done bool
}

func (t *gatedTx) Commit() error {
	defer t.end()
	return t.Tx.Commit()
}

func (t *gatedTx) Rollback() error {
	defer t.end()
	return t.Tx.Rollback()
}

func (t *gatedTx) end() {
	if !t.done {
		t.done = true
		t.c.inTx = false
		t.c.gate.release()
	}
}
