package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/internal/node"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/sqlite"
)

// backupPrefix and backupSuffix frame the names of the backups shredd
// writes: shredd-<UTC time>-root<version>.db.
const (
	backupPrefix = "shredd-"
	backupSuffix = ".db"
)

// backupName names a backup taken at t.
func backupName(t time.Time) string {
	return backupPrefix + t.UTC().Format("20060102T150405.000000000Z") + backupSuffix
}

// afterEpochs writes a backup into --backup-dir after every completed epoch
// (so that a backup the current root can open always exists), keeps the
// newest --backup-keep, and drops the forget ledger's entries that the
// epoch made unnecessary. It returns when ctx ends.
func (p *Program) afterEpochs(ctx context.Context, kick <-chan struct{}, db *storage.DB, keys *keystore.Store, svc *erasure.Service, rootKind string, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		if v, err := keys.Root().Versions(ctx); err == nil {
			if n, err := svc.CompactLedger(ctx, v.MinAvailable); err != nil {
				log.Warn("forget ledger compaction", "error", err.Error())
			} else if n > 0 {
				log.Info("forget ledger compacted", "dropped", n)
			}
		}
		if p.BackupDir == "" {
			continue
		}
		if err := datadir.Prepare(p.BackupDir); err != nil {
			log.Error("backup after epoch", "error", err.Error())
			continue
		}
		path := filepath.Join(p.BackupDir, backupName(time.Now()))
		info, err := sqlite.Backup(ctx, db, path, rootKind)
		if err != nil {
			log.Error("backup after epoch", "error", err.Error())
			continue
		}
		log.Info("backup written", "path", path, "root_version", info.RootVersion, "log_size", info.LogSize)
		if err := pruneBackups(p.BackupDir, p.BackupKeep); err != nil {
			log.Warn("backup retention", "error", err.Error())
		}
	}
}

// listBackups returns the backups shredd wrote in dir, oldest first.
func listBackups(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, backupPrefix) && strings.HasSuffix(n, backupSuffix) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Strings(out) // the names start with the time
	return out, nil
}

// removeTorn removes the unfinished copies of backups a crash interrupted
// in dir.
func removeTorn(dir string) {
	torn, _ := filepath.Glob(filepath.Join(dir, backupPrefix+"*"+backupSuffix+datadir.TempInfix+"*"))
	for _, p := range torn {
		os.Remove(p)
	}
}

// pruneBackups removes all but the newest keep backups of dir, and the
// unfinished copies of backups a crash interrupted.
func pruneBackups(dir string, keep int) error {
	removeTorn(dir)
	all, err := listBackups(dir)
	if err != nil {
		return err
	}
	for len(all) > keep {
		if err := os.Remove(all[0]); err != nil {
			return err
		}
		all = all[1:]
	}
	return datadir.SyncDir(dir)
}

const backupUsage = `usage: shredd backup [--data-dir D] [--out FILE | --dir DIR]   an online, consistent backup of the database
       shredd backup list --dir DIR    the backups in DIR with their root version and log size
       shredd restore [--data-dir D] BACKUP   put BACKUP in place of the database (the server must be stopped)`

// backupCmd runs shredd backup: a copy of the data directory's database
// taken while the server runs (SQLite's VACUUM INTO), with the root version
// and log size it belongs to recorded in it. The root file, the secrets and
// the forget ledger are not in it, by design.
func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "list" {
		return backupListCmd(ctx, args[1:], stdout, stderr)
	}
	fl := flag.NewFlagSet("shredd backup", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dataDir := fl.String("data-dir", envOr(getenv, "SHREDD_DATA_DIR", "./shredd-data"), "data directory")
	store := fl.String("store", getenv("SHREDD_STORE"), "the database, as shredd serve --store (a PostgreSQL database is backed up with pg_dump: docs/scale-out.md)")
	out := fl.String("out", "", "backup file to write (must not exist)")
	dir := fl.String("dir", "", "directory to write the backup into, under a name with its time")
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	if (*out == "") == (*dir == "") || fl.NArg() > 0 {
		fmt.Fprintln(stderr, backupUsage)
		return exitUsage
	}
	if *dir != "" {
		if err := datadir.Prepare(*dir); err != nil {
			fmt.Fprintln(stderr, "shredd backup:", err)
			return exitFailed
		}
		removeTorn(*dir)
		*out = filepath.Join(*dir, backupName(time.Now()))
	}
	db, err := node.OpenDB(ctx, *dataDir, *store)
	if err != nil {
		fmt.Fprintln(stderr, "shredd backup:", err)
		return exitFailed
	}
	defer db.Close()
	kind := "local"
	if _, err := os.Lstat(filepath.Join(*dataDir, node.RootFile)); err != nil {
		kind = "vault-transit"
	}
	info, err := sqlite.Backup(ctx, db, *out, kind)
	if err != nil {
		fmt.Fprintln(stderr, "shredd backup:", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s\troot_version=%d\tlog_size=%d\tforgets=%d\n", *out, info.RootVersion, info.LogSize, info.Forgets)
	return exitOK
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func backupListCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("shredd backup list", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", "", "backup directory")
	if err := fl.Parse(args); err != nil || *dir == "" || fl.NArg() > 0 {
		fmt.Fprintln(stderr, backupUsage)
		return exitUsage
	}
	all, err := listBackups(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "shredd backup list:", err)
		return exitFailed
	}
	for _, b := range all {
		info, err := sqlite.ReadBackupInfo(ctx, b)
		if err != nil {
			fmt.Fprintf(stdout, "%s\tunreadable: %v\n", b, err)
			continue
		}
		fmt.Fprintf(stdout, "%s\ttaken_at=%s\troot=%s\troot_version=%d..%d\tlog_size=%d\tforgets=%d\n",
			b, info.TakenAt.Format(time.RFC3339), info.RootStore, info.MinVersion, info.RootVersion, info.LogSize, info.Forgets)
	}
	return exitOK
}

// restoreCmd runs shredd restore: it checks a backup (integrity, backup
// record), moves the data directory's database aside (never deleted: it is
// renamed shredd.db.replaced-<time>) and puts a copy of the backup in its
// place. The next start checks the backup against the root store (a backup
// older than the last epoch is refused) and re-applies the forgets of the
// forget ledger committed after the backup.
func restoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fl := flag.NewFlagSet("shredd restore", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dataDir := fl.String("data-dir", envOr(getenv, "SHREDD_DATA_DIR", "./shredd-data"), "data directory")
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	if fl.NArg() != 1 {
		fmt.Fprintln(stderr, backupUsage)
		return exitUsage
	}
	if err := restore(ctx, *dataDir, fl.Arg(0), stdout); err != nil {
		fmt.Fprintln(stderr, "shredd restore:", err)
		return exitFailed
	}
	return exitOK
}

func restore(ctx context.Context, dir, backup string, stdout io.Writer) error {
	info, err := sqlite.ReadBackupInfo(ctx, backup)
	if err != nil {
		return err
	}
	if err := datadir.Prepare(dir); err != nil {
		return err
	}
	// With the local root store the check of the next start can be made
	// now: a backup older than the last epoch opens no key.
	if v, err := local.ReadVersions(filepath.Join(dir, node.RootFile)); err == nil && info.MinVersion > 0 && info.MinVersion < v.MinAvailable {
		return fmt.Errorf("%s is a backup taken before the root's last epoch: its bucket keys need root version %d, which root.key destroyed (its oldest version is %d); it opens no key. Restore a backup taken after the last epoch (shredd backup list --dir DIR)",
			backup, info.MinVersion, v.MinAvailable)
	}
	lock, err := os.OpenFile(filepath.Join(dir, node.LockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("data dir %s is in use by a running shredd: stop it first", dir)
	}
	src, err := os.Open(backup)
	if err != nil {
		return err
	}
	defer src.Close()
	dbPath := filepath.Join(dir, node.DBFile)
	tmp := dbPath + datadir.TempInfix + "restore"
	os.Remove(tmp)
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The database being replaced, with its WAL, is moved aside, not
	// deleted: the operator decides when it goes.
	stamp := time.Now().UTC().Format("20060102T150405Z")
	var moved []string
	for _, suffix := range []string{"", "-wal", "-shm"} {
		from := dbPath + suffix
		if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		to := dbPath + ".replaced-" + stamp + suffix
		if err := os.Rename(from, to); err != nil {
			os.Remove(tmp)
			return err
		}
		moved = append(moved, to)
	}
	if err := datadir.Commit(tmp, dbPath); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s (taken %s, root version %d, log size %d, %d forgets) into %s\n",
		backup, info.TakenAt.Format(time.RFC3339), info.RootVersion, info.LogSize, info.Forgets, dbPath)
	if len(moved) > 0 {
		fmt.Fprintf(stdout, "the replaced database was moved to %s\n", strings.Join(moved, ", "))
	}
	fmt.Fprintln(stdout, "start shredd: it re-applies the forgets of the forget ledger that the backup lacks, and refuses a backup older than the root's last epoch")
	return nil
}
