package keystore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // SQLite driver: the key tree and the registry share one file
)

// OpenDB opens (creating if needed) the SQLite database at path with the
// settings the key tree depends on, and checks that they took effect:
//
//   - WAL journal with synchronous=FULL: a commit is durable when it returns,
//     so a crash never loses a committed forget;
//   - secure_delete=ON: deleted rows (destroyed key bytes) are overwritten
//     with zeros instead of lingering in free pages;
//   - immediate transactions: writers take the write lock at BEGIN, so
//     check-then-write sequences cannot interleave;
//   - foreign keys on and a busy timeout for concurrent writers.
func OpenDB(path string) (*sql.DB, error) {
	// Create the file 0600 first: SQLite gives its -wal and -shm files the
	// database file's permissions.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("keystore: open db: %w", err)
	}
	f.Close()
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_secure_delete", "on")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", "10000")
	q.Set("_txlock", "immediate")
	// The path is part of a file: URI: escape what URIs give a meaning to.
	uriPath := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite3", "file:"+uriPath+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("keystore: open db: %w", err)
	}
	db.SetMaxOpenConns(8)
	ctx := context.Background()
	var mode string
	var sd int
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("keystore: open db: %w", err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA secure_delete").Scan(&sd); err != nil {
		db.Close()
		return nil, fmt.Errorf("keystore: open db: %w", err)
	}
	if mode != "wal" || sd != 1 {
		db.Close()
		return nil, fmt.Errorf("keystore: open db: journal_mode=%s secure_delete=%d, want wal and 1", mode, sd)
	}
	return db, nil
}

// CheckpointWAL copies the WAL into the database file and truncates it, so
// that pages holding destroyed keys do not stay in the WAL file. Readers in
// flight can keep a checkpoint from completing; it is retried for up to
// about ten seconds before giving up.
func CheckpointWAL(ctx context.Context, db *sql.DB) error {
	delay := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		var busy, logPages, moved int
		if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &moved); err != nil {
			return fmt.Errorf("keystore: wal checkpoint: %w", err)
		}
		if busy == 0 && moved == logPages {
			return nil
		}
		if attempt == 40 {
			return fmt.Errorf("keystore: wal checkpoint: database still busy after %d attempts", attempt+1)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}
