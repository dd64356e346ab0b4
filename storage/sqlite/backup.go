package sqlite

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
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

// BackupOptions are what Backup needs besides the database.
type BackupOptions struct {
	RootKind    string // the root store's kind ("local", "vault-transit")
	ManifestKey []byte // authenticates the manifest (ManifestKey of subject.key); required
	LedgerLines int64  // lines of the forget ledger now; -1 when unknown
	LedgerHead  string // the forget ledger's chain head, when it has one
}

// Backup writes an online, consistent copy of db to path (SQLite's VACUUM
// INTO: one read transaction, writers go on meanwhile), records its
// BackupInfo in it, checks that its schema is exactly what the migrations
// make (CheckFileSchema: a manifest vouches for no other), fsyncs it, and
// writes its Manifest beside it (path + ManifestSuffix). Both files are
// created exclusively with mode 0600: neither path may exist, and two
// backups never share a name. The copy holds wrapped keys only: without
// the root store it opens nothing.
func Backup(ctx context.Context, sdb *storage.DB, path string, o BackupOptions) (Manifest, error) {
	m := Manifest{TakenAt: time.Now().UTC(), RootStore: o.RootKind, File: filepath.Base(path), LedgerLines: o.LedgerLines, LedgerHead: o.LedgerHead}
	e, ok := sdb.Engine().(*engine)
	if !ok {
		return m, fmt.Errorf("storage: backup: a %s database, not SQLite: back it up with its engine's tools", sdb.Engine().Name())
	}
	if len(o.ManifestKey) == 0 {
		return m, errors.New("storage: backup: no manifest key")
	}
	db := e.db
	mpath := path + ManifestSuffix
	for _, p := range []string{path, mpath} {
		if _, err := os.Lstat(p); err == nil {
			return m, fmt.Errorf("storage: backup: %s exists: choose another name (backups never overwrite)", p)
		}
	}
	var r [8]byte
	rand.Read(r[:])
	tmp := path + datadir.TempInfix + hex.EncodeToString(r[:])
	// VACUUM INTO writes into an empty file that exists: creating it first
	// gives it mode 0600 (SQLite would create it with the umask's, 0644)
	// and makes two backups of the same name meet here, not overwrite.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return m, fmt.Errorf("storage: backup: %w", err)
	}
	f.Close()
	fail := func(err error) (Manifest, error) {
		for _, s := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(tmp + s)
		}
		return m, fmt.Errorf("storage: backup: %w", err)
	}
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return fail(err)
	}
	cp, err := sql.Open("sqlite3", "file:"+uriEscape(tmp)+"?_txlock=immediate")
	if err != nil {
		return fail(err)
	}
	defer cp.Close()
	var lo, hi sql.NullInt64
	if err := cp.QueryRowContext(ctx, `SELECT min(root_version), max(root_version) FROM buckets`).Scan(&lo, &hi); err != nil {
		return fail(err)
	}
	m.MinVersion, m.RootVersion = int(lo.Int64), int(hi.Int64)
	// Tables of other packages, empty in a database that never used them.
	_ = cp.QueryRowContext(ctx, `SELECT count(*) FROM log_entries`).Scan(&m.LogSize)
	_ = cp.QueryRowContext(ctx, `SELECT count(*) FROM forgets`).Scan(&m.Forgets)
	_ = cp.QueryRowContext(ctx, `SELECT v FROM log_meta WHERE k='origin'`).Scan(&m.Instance)
	var last []byte
	if err := cp.QueryRowContext(ctx, `SELECT id FROM forgets WHERE committed_at IS NOT NULL ORDER BY committed_at DESC, id DESC LIMIT 1`).Scan(&last); err == nil {
		m.LastForget = hex.EncodeToString(last)
	}
	// A database restored from a backup carries the table of that backup.
	if _, err := cp.ExecContext(ctx, `DROP TABLE IF EXISTS backup_info`); err != nil {
		return fail(err)
	}
	if _, err := cp.ExecContext(ctx, backupInfoSQL); err != nil {
		return fail(err)
	}
	for k, v := range map[string]any{"taken_at": m.TakenAt.Format(time.RFC3339Nano), "root_store": m.RootStore,
		"root_version": m.RootVersion, "min_version": m.MinVersion, "log_size": m.LogSize, "forgets": m.Forgets} {
		if _, err := cp.ExecContext(ctx, `INSERT INTO backup_info(k, v) VALUES (?, ?)`, k, fmt.Sprint(v)); err != nil {
			return fail(err)
		}
	}
	if err := cp.Close(); err != nil {
		return fail(err)
	}
	if m.SchemaVersion, err = CheckFileSchema(ctx, tmp); err != nil {
		return fail(err)
	}
	if m.SHA256, m.Size, err = digestSync(tmp); err != nil {
		return fail(err)
	}
	// The manifest first: a crash before the backup's own name exists
	// leaves a manifest without a backup (removed with the torn copies),
	// never a backup without its manifest.
	if err := datadir.Create(mpath, m.Marshal(o.ManifestKey), datadir.Secret); err != nil {
		return fail(err)
	}
	crashpoint.Hit("backup:written")
	if err := os.Link(tmp, path); err != nil { // never over an existing file
		os.Remove(mpath)
		return fail(err)
	}
	os.Remove(tmp)
	if err := datadir.SyncDir(filepath.Dir(path)); err != nil {
		return m, fmt.Errorf("storage: backup: %w", err)
	}
	return m, nil
}

// digestSync fsyncs the file at path and returns the SHA-256 of all its
// bytes and its size.
func digestSync(path string) (string, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, f.Close()
}

// ReadBackupInfo reads the BackupInfo a backup file records, after checking
// the file with PRAGMA integrity_check.
func ReadBackupInfo(ctx context.Context, path string) (BackupInfo, error) {
	var info BackupInfo
	if _, err := os.Stat(path); err != nil {
		return info, fmt.Errorf("storage: backup: %w", err)
	}
	db, err := sql.Open("sqlite3", "file:"+uriEscape(path)+"?mode=ro")
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
