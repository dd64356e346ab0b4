package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/shredd/shredd/internal/crashpoint"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/storage"
)

// BackupInfo describes a backup: what it was taken from and which root
// version and transparency log size it belongs to. Backup records it in
// the copy (table backup_info), so that the file describes itself.
type BackupInfo struct {
	TakenAt     time.Time // when the copy was taken
	RootStore   string    // the root store's kind ("local", "vault-transit")
	RootVersion int       // the newest root version its bucket keys are wrapped under
	MinVersion  int       // the oldest; a root store that destroyed it cannot open the copy
	LogSize     int64     // entries of the transparency log in the copy
	Forgets     int64     // forgets in the copy
}

// Backup writes an online, consistent copy of db to path (SQLite's VACUUM
// INTO: one read transaction, writers go on meanwhile), records its
// BackupInfo in it, fsyncs it and renames it into place. path must not
// exist. The copy holds wrapped keys only: without the root store it opens
// nothing.
func Backup(ctx context.Context, sdb *storage.DB, path, rootKind string) (BackupInfo, error) {
	info := BackupInfo{TakenAt: time.Now().UTC(), RootStore: rootKind}
	e, ok := sdb.Engine().(*engine)
	if !ok {
		return info, fmt.Errorf("storage: backup: a %s database, not SQLite: back it up with its engine's tools", sdb.Engine().Name())
	}
	db := e.db
	if _, err := os.Lstat(path); err == nil {
		return info, fmt.Errorf("storage: backup: %s exists", path)
	}
	tmp := path + datadir.TempInfix + "backup"
	os.Remove(tmp)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		os.Remove(tmp)
		return info, fmt.Errorf("storage: backup: %w", err)
	}
	fail := func(err error) (BackupInfo, error) {
		os.Remove(tmp)
		return info, fmt.Errorf("storage: backup: %w", err)
	}
	cp, err := sql.Open("sqlite3", "file:"+tmp+"?_txlock=immediate")
	if err != nil {
		return fail(err)
	}
	defer cp.Close()
	var lo, hi sql.NullInt64
	if err := cp.QueryRowContext(ctx, `SELECT min(root_version), max(root_version) FROM buckets`).Scan(&lo, &hi); err != nil {
		return fail(err)
	}
	info.MinVersion, info.RootVersion = int(lo.Int64), int(hi.Int64)
	// Tables of other packages, absent from a database that never used them.
	_ = cp.QueryRowContext(ctx, `SELECT count(*) FROM log_entries`).Scan(&info.LogSize)
	_ = cp.QueryRowContext(ctx, `SELECT count(*) FROM forgets`).Scan(&info.Forgets)
	// A database restored from a backup carries the table of that backup.
	if _, err := cp.ExecContext(ctx, `DROP TABLE IF EXISTS backup_info`); err != nil {
		return fail(err)
	}
	if _, err := cp.ExecContext(ctx, `CREATE TABLE backup_info (k TEXT PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		return fail(err)
	}
	for k, v := range map[string]any{"taken_at": info.TakenAt.Format(time.RFC3339Nano), "root_store": info.RootStore,
		"root_version": info.RootVersion, "min_version": info.MinVersion, "log_size": info.LogSize, "forgets": info.Forgets} {
		if _, err := cp.ExecContext(ctx, `INSERT INTO backup_info(k, v) VALUES (?, ?)`, k, fmt.Sprint(v)); err != nil {
			return fail(err)
		}
	}
	if err := cp.Close(); err != nil {
		return fail(err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return fail(err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	crashpoint.Hit("backup:written")
	if err := os.Link(tmp, path); err != nil { // never over an existing file
		return fail(err)
	}
	os.Remove(tmp)
	if err := datadir.SyncDir(filepath.Dir(path)); err != nil {
		return info, fmt.Errorf("storage: backup: %w", err)
	}
	return info, nil
}

// ReadBackupInfo reads the BackupInfo a backup file records, after checking
// the file with PRAGMA integrity_check.
func ReadBackupInfo(ctx context.Context, path string) (BackupInfo, error) {
	var info BackupInfo
	if _, err := os.Stat(path); err != nil {
		return info, fmt.Errorf("storage: backup: %w", err)
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return info, fmt.Errorf("storage: backup: %w", err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		return info, fmt.Errorf("storage: backup %s: integrity check failed: %v %s", path, err, ok)
	}
	rows, err := db.QueryContext(ctx, `SELECT k, v FROM backup_info`)
	if err != nil {
		return info, fmt.Errorf("storage: %s is not a shredd backup (no backup_info): %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return info, err
		}
		switch k {
		case "taken_at":
			info.TakenAt, _ = time.Parse(time.RFC3339Nano, v)
		case "root_store":
			info.RootStore = v
		case "root_version":
			fmt.Sscan(v, &info.RootVersion)
		case "min_version":
			fmt.Sscan(v, &info.MinVersion)
		case "log_size":
			fmt.Sscan(v, &info.LogSize)
		case "forgets":
			fmt.Sscan(v, &info.Forgets)
		}
	}
	return info, rows.Err()
}
