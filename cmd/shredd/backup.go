package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/erasure"
	"github.com/shredd/shredd/internal/datadir"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/registry"
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
func (p *Program) afterEpochs(ctx context.Context, kick <-chan struct{}, db *storage.DB, keys *keystore.Tree, svc *erasure.Eraser, rootKind string, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		if v, err := keys.Root().Versions(ctx); err == nil {
			if n, err := svc.Recovery().CompactLedger(ctx, v.MinAvailable); err != nil {
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
		info, err := writeBackup(ctx, db, path, p.DataDir, p.LedgerPath(), rootKind)
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

// writeBackup writes a backup of db to path with its manifest
// (sqlite.Backup), authenticated with the key derived from the data
// directory's subject.key, and the forget ledger's position now.
func writeBackup(ctx context.Context, db *storage.DB, path, dataDir, ledger, rootKind string) (sqlite.Manifest, error) {
	secret, err := subjectSecret(dataDir)
	if err != nil {
		return sqlite.Manifest{}, err
	}
	// Every registration acknowledged before the backup into the copy:
	// the server folds its registration WAL within a few tens of
	// milliseconds (a stopped server's WAL waits for its next start).
	point, err := waitFolded(ctx, db, dataDir, registry.WALKey(secret))
	if err != nil {
		return sqlite.Manifest{}, err
	}
	m, err := sqlite.Backup(ctx, db, path, sqlite.BackupOptions{RootKind: rootKind, ManifestKey: sqlite.ManifestKey(secret), LedgerLines: ledgerLines(ledger)})
	if errors.Is(err, storage.ErrSchemaAltered) {
		return m, fmt.Errorf("%w; the database was changed outside shredd, so no backup of it is written (restore would refuse it, and shredd serve refuses to start on it): remove the object after reading what it does, or restore the newest backup", err)
	}
	if err != nil {
		return m, err
	}
	return m, registry.RecordBackup(ctx, db, point)
}

// foldWait bounds how long a backup waits for the registrations
// acknowledged before it to be folded into the database.
const foldWait = 10 * time.Second

// waitFolded waits until the database holds every registration the data
// directory's registration WAL acknowledged when it was called, and
// returns the registrations the database holds then (registry.BackupPoint:
// the copy holds at least those; the WAL keeps what comes after, for a
// restore of this backup). walKey is the WAL's MAC key (registry.WALKey).
// When the fold does not get there within foldWait (no server runs, after
// a crash), the backup goes on without the rest, which the WAL keeps and
// the next start folds, and says so.
func waitFolded(ctx context.Context, db *storage.DB, dataDir string, walKey []byte) (int64, error) {
	acked, err := registry.Acknowledged(filepath.Join(dataDir, registry.WALDir), walKey)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(foldWait)
	for {
		point, err := registry.BackupPoint(ctx, db)
		if err != nil || uint64(point) >= acked {
			return point, err
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "shredd backup: %d registrations acknowledged before the backup are not in the database yet (no server folds them); the registration WAL keeps them, and a restore of this backup registers them again while the WAL is kept\n", acked-uint64(point))
			return point, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// manifestKey is the key that authenticates the data directory's backup
// manifests (sqlite.ManifestKey of subject.key).
func manifestKey(dataDir string) ([]byte, error) {
	secret, err := subjectSecret(dataDir)
	if err != nil {
		return nil, err
	}
	return sqlite.ManifestKey(secret), nil
}

// subjectSecret reads the data directory's subject.key, from which the
// backup manifests' key and the registration WAL's key derive.
func subjectSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, node.SecretFile)
	secret, err := datadir.Read(path, datadir.Secret, 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing: backup manifests are authenticated with it; put back the data directory's secrets from where you keep them (docs/operations.md), then run the command again", path)
	}
	return secret, err
}

// ledgerLines counts the lines of the forget ledger at path: -1 when it
// cannot be read (missing), for the manifest and restore's warning.
func ledgerLines(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	var n int64
	buf := make([]byte, 64<<10)
	for {
		k, err := f.Read(buf)
		for _, c := range buf[:k] {
			if c == '\n' {
				n++
			}
		}
		if err == io.EOF {
			return n
		}
		if err != nil {
			return -1
		}
	}
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
		if err := os.Remove(all[0] + sqlite.ManifestSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		all = all[1:]
	}
	return datadir.SyncDir(dir)
}

const backupUsage = `usage: shredd backup [--data-dir D] [--out FILE | --dir DIR]   an online, consistent backup of the database, with its manifest FILE.manifest
       shredd backup list --dir DIR    the backups in DIR with their root version and log size
       shredd restore [--data-dir D] BACKUP   check BACKUP against its manifest and put it in place of the database (the server must be stopped)`

// backupCmd runs shredd backup: a copy of the data directory's database
// taken while the server runs (SQLite's VACUUM INTO), with the root version
// and log size it belongs to recorded in it, and its authenticated
// manifest beside it (FILE.manifest: digest, instance, schema version,
// root version, log size, ledger position), both mode 0600. The root
// file, the secrets and the forget ledger are not in it, by design.
func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "list" {
		return backupListCmd(ctx, args[1:], stdout, stderr)
	}
	fl := flag.NewFlagSet("shredd backup", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dataDir := fl.String("data-dir", envOr(getenv, "SHREDD_DATA_DIR", "./shredd-data"), "data directory")
	store := fl.String("store", getenv("SHREDD_STORE"), "the database, as shredd serve --store (a PostgreSQL database is backed up with pg_dump: docs/scale-out.md)")
	ledger := fl.String("forget-ledger", getenv("SHREDD_FORGET_LEDGER"), "the forget ledger, as shredd serve --forget-ledger (default DATA_DIR/forgets.ledger): its position is recorded in the manifest")
	out := fl.String("out", "", "backup file to write (must not exist; its manifest goes to FILE.manifest)")
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
	if *ledger == "" {
		*ledger = filepath.Join(*dataDir, node.LedgerFile)
	}
	info, err := writeBackup(ctx, db, *out, *dataDir, *ledger, kind)
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

// restoreCmd runs shredd restore: it checks a backup against its
// manifest and the data directory (restore), moves the data directory's
// database aside under a name never used before, and puts the checked copy
// of the backup in its place. The next start checks the backup against the
// root store (a backup older than the last epoch is refused), checks its
// schema again, and re-applies the forgets of the forget ledger committed
// after the backup.
func restoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fl := flag.NewFlagSet("shredd restore", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dataDir := fl.String("data-dir", envOr(getenv, "SHREDD_DATA_DIR", "./shredd-data"), "data directory")
	ledger := fl.String("forget-ledger", getenv("SHREDD_FORGET_LEDGER"), "the forget ledger, as shredd serve --forget-ledger (default DATA_DIR/forgets.ledger): restore warns when it looks lost")
	acceptLoss := fl.Bool("accept-loss", false, "restore a backup that lacks registrations shredd acknowledged after it (and the WAL no longer has), recording their loss with the root")
	if err := fl.Parse(args); err != nil {
		return exitUsage
	}
	if fl.NArg() != 1 {
		fmt.Fprintln(stderr, backupUsage)
		return exitUsage
	}
	if *ledger == "" {
		*ledger = filepath.Join(*dataDir, node.LedgerFile)
	}
	if err := restore(ctx, *dataDir, *ledger, fl.Arg(0), *acceptLoss, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "shredd restore:", err)
		return exitFailed
	}
	return exitOK
}

// restore puts backup in place of dir's database after these checks, in
// this order, each refusal naming the check and the fix: the data
// directory is not in use (its lock, held to the end: two restores at once
// cannot interleave); the manifest verifies under the data directory's
// subject.key; the backup is of this instance (the transparency log's
// origin, from log.key); every byte of the copy matches the manifest's
// SHA-256 (the check is made on the copy that is put in place, not on the
// file it was read from); the copy passes SQLite's integrity check and its
// schema is exactly what the migrations make for its version; and, with
// the local root store, its root versions were not destroyed by an epoch,
// and it holds, with the registration WAL, every registration the mark
// kept in root.key says was acknowledged (unless acceptLoss, which then
// records the loss with the root).
// The database being replaced is moved, with its WAL, to names created
// exclusively (time in nanoseconds and a random part): nothing is ever
// overwritten.
func restore(ctx context.Context, dir, ledger, backup string, acceptLoss bool, stdout, stderr io.Writer) error {
	if err := datadir.Prepare(dir); err != nil {
		return err
	}
	lock, err := datadir.LockFor(dir, "a running shredd or another shredd restore: stop the server, or let the other restore finish, then run this one again")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	key, err := manifestKey(dir)
	if err != nil {
		return err
	}
	mb, err := os.ReadFile(backup + sqlite.ManifestSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("manifest check: %s has no manifest (%s): it was not written by this release's shredd backup, or its manifest was lost; restore a backup that has its manifest (shredd backup list --dir DIR)", backup, filepath.Base(backup)+sqlite.ManifestSuffix)
	}
	if err != nil {
		return err
	}
	m, err := sqlite.ParseManifest(mb, key)
	switch {
	case errors.Is(err, sqlite.ErrManifestMAC):
		return fmt.Errorf("manifest check: the manifest of %s does not verify under this data directory's subject.key: it was edited, or the backup belongs to another data directory; restore a backup this data directory's shredd wrote", backup)
	case err != nil:
		return fmt.Errorf("manifest check: %s%s: %w; restore a backup whose manifest shredd backup wrote", backup, sqlite.ManifestSuffix, err)
	}
	self, err := instanceOf(ctx, dir)
	if err != nil {
		return err
	}
	if m.Instance != self {
		return fmt.Errorf("instance check: %s is a backup of another shredd instance (log origin %q), not of this data directory's (%q): restore a backup of this instance, or restore that instance's whole data directory (its secrets with its database) instead", backup, m.Instance, self)
	}
	dbPath := filepath.Join(dir, node.DBFile)
	tmp, err := copyChecked(backup, dbPath, m)
	if err != nil {
		return err
	}
	defer removeCopy(tmp) // nothing after Commit below: the copy has become the database
	if _, err := sqlite.ReadBackupInfo(ctx, tmp); err != nil {
		return fmt.Errorf("integrity check: %w; restore another backup", err)
	}
	v, err := sqlite.CheckFileSchema(ctx, tmp)
	switch {
	case errors.Is(err, storage.ErrSchemaAltered):
		return fmt.Errorf("schema check: %s: %w; an object the migrations do not make can keep destroyed keys alive, so it is never restored: restore another backup", backup, err)
	case errors.Is(err, storage.ErrSchemaTooNew):
		return fmt.Errorf("schema check: %s: %w; restore it with the release that wrote it, or a newer one", backup, err)
	case err != nil:
		return fmt.Errorf("schema check: %s: %w; restore another backup", backup, err)
	case v != m.SchemaVersion:
		return fmt.Errorf("schema check: %s is at schema version %d, its manifest says %d; restore another backup", backup, v, m.SchemaVersion)
	}
	// With the local root store the check of the next start can be made
	// now: a backup older than the last epoch opens no key.
	rootV, rootErr := local.ReadVersions(filepath.Join(dir, node.RootFile))
	if rootErr == nil && m.MinVersion > 0 && m.MinVersion < rootV.MinAvailable {
		return fmt.Errorf("%s is a backup taken before the root's last epoch: its bucket keys need root version %d, which root.key destroyed (its oldest version is %d); it opens no key. Restore a backup taken after the last epoch (shredd backup list --dir DIR)",
			backup, m.MinVersion, rootV.MinAvailable)
	}
	warnLedger(stderr, ledger, m, rootErr == nil && rootV.MinAvailable <= m.MinVersion)
	if err := checkRestoreWAL(ctx, dir, backup, tmp, acceptLoss); err != nil {
		return err
	}

	// The database being replaced, with its WAL, is moved aside, not
	// deleted: the operator decides when it goes.
	stamp := fmt.Sprintf("%s-%d-%s", time.Now().UTC().Format("20060102T150405Z"), time.Now().UnixNano(), hex.EncodeToString(randBytes(6)))
	var moved []string
	for _, suffix := range []string{"", "-wal", "-shm"} {
		from := dbPath + suffix
		if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		to := dbPath + ".replaced-" + stamp + suffix
		if err := moveExclusive(from, to); err != nil {
			return fmt.Errorf("moving the replaced database aside: %w; nothing was overwritten (already moved: %s): move those files back before you start shredd", err, strings.Join(moved, ", "))
		}
		moved = append(moved, to)
	}
	if err := datadir.Commit(tmp, dbPath); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s (taken %s, instance %s, schema version %d, root version %d, log size %d, %d forgets) into %s\n",
		backup, m.TakenAt.Format(time.RFC3339), m.Instance, m.SchemaVersion, m.RootVersion, m.LogSize, m.Forgets, dbPath)
	if len(moved) > 0 {
		fmt.Fprintf(stdout, "the replaced database was moved to %s\n", strings.Join(moved, ", "))
	}
	if acceptLoss {
		if err := acceptRestoreLoss(ctx, dir, dbPath, stdout); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, "start shredd: it re-applies the forgets of the forget ledger that the backup lacks, and refuses a backup older than the root's last epoch")
	return nil
}

// checkRestoreWAL refuses, before anything is replaced, a backup that
// with the registration WAL in dir holds fewer registrations than the mark
// the local root keeps (registry.CheckWALMark): registrations acknowledged
// after it that the WAL no longer has (a newer backup let them go). With
// acceptLoss it lets the restore go on; the loss is recorded once the
// backup is in place (acceptRestoreLoss).
func checkRestoreWAL(ctx context.Context, dir, backup, copyPath string, acceptLoss bool) error {
	raw, err := local.ReadMark(filepath.Join(dir, node.RootFile), registry.MarkStream)
	if err != nil {
		return nil // no local root, or no mark kept: nothing to check here (the start checks what it can)
	}
	mark, err := registry.ParseMark(raw)
	if err != nil {
		return err
	}
	secret, err := subjectSecret(dir)
	if err != nil {
		return err
	}
	db, current, err := sqlite.OpenReadOnly(ctx, copyPath)
	if err != nil || !current {
		return nil // a backup of an earlier schema: its start migrates it, then checks
	}
	defer db.Close()
	err = registry.CheckWALMark(ctx, db, mark, filepath.Join(dir, registry.WALDir), registry.WALKey(secret))
	var behind *registry.BehindError
	switch {
	case errors.As(err, &behind) && !acceptLoss:
		return fmt.Errorf("WAL check: %s holds registrations up to %d and %s does not hold %d to %d, but shredd acknowledged up to %d (the mark kept in root.key): %w. Nothing was replaced: "+
			"restore a newer backup that holds them (shredd backup list --dir DIR), or, to restore this one and lose them, run the restore again with --accept-loss, which records the loss with the root (every later erasure attestation states it)",
			backup, behind.Folded, behind.Dir, behind.From, behind.To, behind.Mark, registry.ErrWALBehind)
	case errors.As(err, &behind):
		return nil
	}
	return err
}

// acceptRestoreLoss records with the local root the registrations the
// restored database at dbPath and the WAL lack (shredd restore
// --accept-loss).
func acceptRestoreLoss(ctx context.Context, dir, dbPath string, stdout io.Writer) error {
	root, err := local.Open(filepath.Join(dir, node.RootFile))
	if err != nil {
		return err
	}
	secret, err := subjectSecret(dir)
	if err != nil {
		return err
	}
	db, _, err := sqlite.OpenReadOnly(ctx, dbPath)
	if err != nil || db == nil {
		return fmt.Errorf("recording the loss: the restored database: %v; run shredd wal accept-loss", err)
	}
	defer db.Close()
	lost, err := registry.AcceptLoss(ctx, db, root, registry.MarkStream, filepath.Join(dir, registry.WALDir), registry.WALKey(secret), time.Now())
	if err != nil {
		return fmt.Errorf("recording the loss: %w; run shredd wal accept-loss", err)
	}
	if lost.From > 0 {
		fmt.Fprintf(stdout, "recorded with the root: registrations %s are lost; every erasure attestation signed from now on states it (residual lost_registrations)\n", lost)
	}
	return nil
}

// instanceOf names the instance of the data directory dir: the origin of
// its transparency log, from the signed-note key log.key (made at the
// first start, one per data directory; the database records the same
// origin in log_meta, and a start refuses a database of another).
func instanceOf(ctx context.Context, dir string) (string, error) {
	path := filepath.Join(dir, node.LogKeyFile)
	b, err := datadir.Read(path, datadir.Secret, 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("instance check: %s is missing, so this data directory's instance is unknown: put back the data directory's secrets (log.key with subject.key and the others) from where you keep them, then run the restore again", path)
	}
	if err != nil {
		return "", fmt.Errorf("instance check: %w", err)
	}
	s, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return "", fmt.Errorf("instance check: %s: %w; put back the log key from where you keep the data directory's secrets", path, err)
	}
	return s.Name(), nil
}

// copyChecked copies backup to a fresh file beside dbPath (created
// exclusively, mode 0600), fsyncs it, and checks its size and SHA-256
// against m: the digest covers every byte, so one flipped bit anywhere is
// refused. It returns the copy's name.
func copyChecked(backup, dbPath string, m sqlite.Manifest) (string, error) {
	src, err := os.Open(backup)
	if err != nil {
		return "", err
	}
	defer src.Close()
	tmp := dbPath + datadir.TempInfix + "restore-" + hex.EncodeToString(randBytes(8))
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), src)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != m.Size || got != m.SHA256 {
		os.Remove(tmp)
		return "", fmt.Errorf("digest check: %s does not match its manifest (%d bytes with SHA-256 %s, the manifest says %d bytes with %s): its bytes changed since shredd wrote it (flipped bits, a truncation or an edit); restore another backup (shredd backup list --dir DIR)",
			backup, n, got, m.Size, m.SHA256)
	}
	return tmp, nil
}

// removeCopy removes a checked copy that was not put in place, with the
// files SQLite may have made beside it while checking it.
func removeCopy(tmp string) {
	for _, s := range []string{"", "-wal", "-shm", "-journal"} {
		os.Remove(tmp + s)
	}
}

// moveExclusive renames from to to, which must not exist: a hard link
// (which fails when to exists) then the removal of from. os.Rename would
// replace an existing to without a word.
func moveExclusive(from, to string) error {
	if err := os.Link(from, to); err != nil {
		return err
	}
	if err := os.Remove(from); err != nil {
		return err
	}
	return datadir.SyncDir(filepath.Dir(to))
}

// warnLedger warns when the forget ledger looks lost: missing, or shorter
// than when the backup was taken while no epoch (noEpoch: with the local
// root store, none since the backup) can have compacted it. Without it the
// forgets committed after the backup are not re-applied, and their
// subjects' data would open again.
func warnLedger(w io.Writer, ledger string, m sqlite.Manifest, noEpoch bool) {
	lines := ledgerLines(ledger)
	switch {
	case lines < 0:
		fmt.Fprintf(w, "warning: the forget ledger %s is missing: the forgets committed after this backup (taken %s) cannot be re-applied, and their subjects' data would open again; put the ledger back (it is never part of a backup) before you start shredd, or forget those subjects again at once\n",
			ledger, m.TakenAt.Format(time.RFC3339))
	case noEpoch && m.LedgerLines > 0 && lines < m.LedgerLines:
		fmt.Fprintf(w, "warning: the forget ledger %s has %d lines, fewer than the %d it had when this backup was taken, and no epoch has compacted it since: forgets committed after the backup may be lost and their subjects' data would open again; put the whole ledger back before you start shredd, or forget those subjects again at once\n",
			ledger, lines, m.LedgerLines)
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}
