package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/storage/sqlite"
)

// keepKeysTrigger is route 2 of issue 23: one statement that makes every
// update of a subject's wrapped key a silent no-op, so that a forget
// would report a key destroyed that stays in the database.
const keepKeysTrigger = `CREATE TRIGGER keep_keys BEFORE UPDATE OF wrapped ON subjects BEGIN SELECT RAISE(IGNORE); END`

// restoreFixture is a data directory with sealed records of alice and bob,
// stopped, and a backup of it taken with shredd backup.
type restoreFixture struct {
	dir, backup string
	alice, bob  record
}

func newRestoreFixture(t *testing.T) restoreFixture {
	t.Helper()
	f := restoreFixture{dir: t.TempDir()}
	s := startServer(t, f.dir, serverOpts{Buckets: 4})
	s.putKinds(t, "episodic")
	f.alice = s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice's record", "a")
	f.bob = s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "b")
	s.stop()
	f.backup = filepath.Join(t.TempDir(), "b.db")
	cli(t, "", nil, nil, "backup", "--data-dir", f.dir, "--out", f.backup).want(t, 0)
	return f
}

// writeBackupFiles writes a backup and its manifest as given to a new
// path, as an attacker with access to the backups' storage would.
func writeBackupFiles(t *testing.T, db, manifest []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "b.db")
	if err := os.WriteFile(p, db, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+sqlite.ManifestSuffix, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func execSQL(t *testing.T, path, q string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// reauthenticate writes the manifest a holder of the data directory's
// subject.key would write for the file at path: the worst case, where the
// digest no longer protects the backup and only the schema check does.
func reauthenticate(t *testing.T, dir, path string) {
	t.Helper()
	key := sqlite.ManifestKey(readFile(t, filepath.Join(dir, node.SecretFile)))
	m, err := sqlite.ParseManifest(readFile(t, path+sqlite.ManifestSuffix), key)
	if err != nil {
		t.Fatal(err)
	}
	b := readFile(t, path)
	sum := sha256.Sum256(b)
	m.SHA256, m.Size = fmt.Sprintf("%x", sum), int64(len(b))
	if err := os.WriteFile(path+sqlite.ManifestSuffix, m.Marshal(key), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fileSum is the SHA-256 of a file, "" when it does not exist.
func fileSum(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

func replacedFiles(t *testing.T, dir string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(dir, node.DBFile+".replaced-*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range all {
		if !strings.HasSuffix(p, "-wal") && !strings.HasSuffix(p, "-shm") {
			out = append(out, p)
		}
	}
	return out
}

// TestRestoreRefusesPlantedTrigger is route 2 of issue 23 end to end: a
// backup carrying a trigger that keeps keys alive is refused by restore,
// by its digest with the manifest it came with, and by the schema check
// even with a manifest re-made with the data directory's own key; the
// same trigger planted in the live database stops the start, naming it
// and the fix; once it is removed the server starts and a forget really
// destroys the key.
func TestRestoreRefusesPlantedTrigger(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	before := fileSum(t, filepath.Join(f.dir, node.DBFile))

	evil := writeBackupFiles(t, readFile(t, f.backup), readFile(t, f.backup+sqlite.ManifestSuffix))
	execSQL(t, evil, keepKeysTrigger)
	cli(t, "", nil, nil, "restore", "--data-dir", f.dir, evil).want(t, 1, "digest check", "restore another backup")

	reauthenticate(t, f.dir, evil)
	cli(t, "", nil, nil, "restore", "--data-dir", f.dir, evil).want(t, 1, "schema check", "extra trigger keep_keys on subjects", "restore another backup")
	if got := fileSum(t, filepath.Join(f.dir, node.DBFile)); got != before || len(replacedFiles(t, f.dir)) != 0 {
		t.Fatal("a refused restore changed the live database")
	}

	// The same trigger in the live database: the start is refused.
	live := filepath.Join(f.dir, node.DBFile)
	execSQL(t, live, keepKeysTrigger)
	cli(t, "", nil, nil, "serve", "--data-dir", f.dir, "--addr", "127.0.0.1:0", "--buckets", "4").
		want(t, 1, "extra trigger keep_keys on subjects", "can keep destroyed keys alive", "restore the newest backup")
	// Nor is a backup of it written.
	out := filepath.Join(t.TempDir(), "tainted.db")
	cli(t, "", nil, nil, "backup", "--data-dir", f.dir, "--out", out).want(t, 1, "extra trigger keep_keys on subjects", "no backup of it is written")
	if left, _ := filepath.Glob(out + "*"); len(left) > 0 {
		t.Fatalf("the refused backup left %v", left)
	}

	// The fix the message names works: without the trigger, the start
	// goes on and a forget destroys alice's key.
	execSQL(t, live, `DROP TRIGGER keep_keys`)
	s := startServer(t, f.dir, serverOpts{Buckets: 4})
	fv := s.forget(t, "alice@example.com")
	s.waitForget(t, fv.Forget, "past committed", func(f forgetView) bool { return f.State != "requested" })
	s.shredded(t, f.alice)
	s.open(t, f.bob)
	s.stop()
}

// TestRestoreRefusesFlippedBits flips one bit in every page of a backup,
// one page at a time: each copy is refused by the digest check, and the
// live database is left as it was.
func TestRestoreRefusesFlippedBits(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	live := filepath.Join(f.dir, node.DBFile)
	before := fileSum(t, live)
	orig, manifest := readFile(t, f.backup), readFile(t, f.backup+sqlite.ManifestSuffix)
	pageSize := int(binary.BigEndian.Uint16(orig[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	pages := len(orig) / pageSize
	if pages < 10 || len(orig)%pageSize != 0 {
		t.Fatalf("backup of %d bytes, page size %d: want whole pages, at least 10", len(orig), pageSize)
	}
	for p := 0; p < pages; p++ {
		b := bytes.Clone(orig)
		off := p*pageSize + (p*131+17)%pageSize
		b[off] ^= 1 << (p % 8)
		path := writeBackupFiles(t, b, manifest)
		r := cli(t, "", nil, nil, "restore", "--data-dir", f.dir, path)
		if r.code != 1 || !bytes.Contains(r.stderr, []byte("digest check")) || !bytes.Contains(r.stderr, []byte("restore another backup")) {
			t.Fatalf("page %d of %d (byte %d flipped): exit %d\n%s", p, pages, off, r.code, r.stderr)
		}
	}
	t.Logf("%d pages of %d bytes: each flip refused", pages, pageSize)
	if got := fileSum(t, live); got != before || len(replacedFiles(t, f.dir)) != 0 {
		t.Fatal("a refused restore changed the live database")
	}
	// The unflipped backup restores.
	cli(t, "", nil, nil, "restore", "--data-dir", f.dir, f.backup).want(t, 0)
}

// TestRestoreRefusesAnotherInstance: a backup of another data directory is
// refused, before anything moves: by its manifest when the other directory
// has its own subject.key, by the instance check when it shares it.
func TestRestoreRefusesAnotherInstance(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	before := fileSum(t, filepath.Join(f.dir, node.DBFile))

	other := t.TempDir()
	startServer(t, other, serverOpts{Buckets: 4}).stop()
	ob := backupTo(t, other, "other.db")
	cli(t, "", nil, nil, "restore", "--data-dir", f.dir, ob).want(t, 1, "manifest check", "belongs to another data directory", "restore a backup this data directory's shredd wrote")

	// A copy of the data directory's subject.key (a cloned configuration)
	// makes the manifest verify: the instance check still refuses.
	twin := t.TempDir()
	if err := os.WriteFile(filepath.Join(twin, node.SecretFile), readFile(t, filepath.Join(f.dir, node.SecretFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	startServer(t, twin, serverOpts{Buckets: 4}).stop()
	tb := backupTo(t, twin, "twin.db")
	cli(t, "", nil, nil, "restore", "--data-dir", f.dir, tb).want(t, 1, "instance check", "backup of another shredd instance", "restore a backup of this instance")

	if got := fileSum(t, filepath.Join(f.dir, node.DBFile)); got != before || len(replacedFiles(t, f.dir)) != 0 {
		t.Fatal("a refused restore changed the live database")
	}
	// Put in place by hand, the other instance's database stops the
	// start, saying what to put back.
	loseDatabase(t, f.dir)
	if err := os.WriteFile(filepath.Join(f.dir, node.DBFile), readFile(t, ob), 0o600); err != nil {
		t.Fatal(err)
	}
	// (The secrets' pins in the database catch it first: its subject.key
	// is not this data directory's.)
	cli(t, "", nil, nil, "serve", "--data-dir", f.dir, "--addr", "127.0.0.1:0", "--buckets", "4").
		want(t, 1, "is not the one this database was made with", "Put back the subject.key that goes with this database")
	// The instance's own backup restores, and the server starts on it.
	cli(t, "", nil, nil, "restore", "--data-dir", f.dir, f.backup).want(t, 0)
	s := startServer(t, f.dir, serverOpts{Buckets: 4})
	s.open(t, f.alice)
	s.stop()
}

// TestRestoresNeverOverwrite: restores one after another within the same
// second, and restores racing each other, never lose a database: every
// database replaced is kept under a name of its own.
func TestRestoresNeverOverwrite(t *testing.T) {
	t.Parallel()
	f := newRestoreFixture(t)
	live := filepath.Join(f.dir, node.DBFile)
	first := fileSum(t, live)

	// In a row, as fast as they go (the issue: the same second).
	for range 3 {
		cli(t, "", nil, nil, "restore", "--data-dir", f.dir, f.backup).want(t, 0)
	}
	kept := replacedFiles(t, f.dir)
	if len(kept) != 3 {
		t.Fatalf("after 3 restores %d replaced databases are kept, want 3: %v", len(kept), kept)
	}
	found := false
	for _, p := range kept {
		found = found || fileSum(t, p) == first
	}
	if !found {
		t.Fatal("the database that was live before the restores is lost")
	}

	// Racing: each ends with the restore done or refused because the
	// other holds the data directory; no database is lost either way.
	for round := range 5 {
		n := len(replacedFiles(t, f.dir))
		var wg sync.WaitGroup
		out := make([][]byte, 2)
		codes := make([]int, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.CommandContext(context.Background(), shreddBinary(t), "restore", "--data-dir", f.dir, f.backup)
				cmd.Env = cleanEnv()
				out[i], _ = cmd.CombinedOutput()
				codes[i] = cmd.ProcessState.ExitCode()
			}()
		}
		wg.Wait()
		ok := 0
		for i := range 2 {
			switch {
			case codes[i] == 0:
				ok++
			case codes[i] == 1 && bytes.Contains(out[i], []byte("in use by a running shredd or another shredd restore")):
			default:
				t.Fatalf("round %d: restore %d: exit %d\n%s", round, i, codes[i], out[i])
			}
		}
		if ok == 0 {
			t.Fatalf("round %d: neither restore ran:\n%s\n%s", round, out[0], out[1])
		}
		if got := len(replacedFiles(t, f.dir)); got != n+ok {
			t.Fatalf("round %d: %d restores done, %d replaced databases kept (were %d): one was overwritten", round, ok, got, n)
		}
		if fileSum(t, live) != fileSum(t, f.backup) {
			t.Fatalf("round %d: the live database is not the backup", round)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(f.dir, "*.tmp-*"))
	if len(leftovers) > 0 {
		t.Fatalf("restores left %v", leftovers)
	}
}

// cleanEnv is the test's environment without SHREDD_ variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHREDD_") {
			env = append(env, kv)
		}
	}
	return env
}

// TestBackupFilesPrivate: every backup and manifest shredd writes (shredd
// backup --out and --dir, and the server's backup after an epoch) has mode
// 0600, whatever the umask.
func TestBackupFilesPrivate(t *testing.T) {
	t.Parallel()
	dir, backups := t.TempDir(), filepath.Join(t.TempDir(), "backups")
	s := startServer(t, dir, serverOpts{Buckets: 4, Args: []string{"--backup-dir", backups}})
	s.putKinds(t, "episodic")
	s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "x", "c")
	s.runEpoch(t)
	auto := waitBackups(t, backups, 1)[0]
	out := backupTo(t, dir, "out.db")
	cli(t, "", nil, nil, "backup", "--data-dir", dir, "--dir", backups).want(t, 0)
	all := waitBackups(t, backups, 2)
	s.stop()
	for _, p := range append(all, out, auto) {
		for _, q := range []string{p, p + sqlite.ManifestSuffix} {
			fi, err := os.Stat(q)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", filepath.Base(q), fi.Mode().Perm())
			}
		}
	}
	// A backup never overwrites: the same --out again is refused.
	cli(t, "", nil, nil, "backup", "--data-dir", dir, "--out", out).want(t, 1, "exists")
}

// TestRestoreWarnsLostLedger: a database and a forget ledger lost
// together, then a restore: restore warns that the forgets after the
// backup cannot be re-applied; likewise for a ledger shorter than when the
// backup was taken with no epoch since.
func TestRestoreWarnsLostLedger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{Buckets: 4})
	s.putKinds(t, "episodic")
	s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "x", "c")
	alice := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's record", "a")
	s.forget(t, "carol")
	backup := backupTo(t, dir, "b.db")
	s.forget(t, "alice")
	s.stop()
	ledger := filepath.Join(dir, node.LedgerFile)
	saved := readFile(t, ledger)

	// A ledger cut back to nothing, with no epoch since the backup.
	if err := os.WriteFile(ledger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, "", nil, nil, "restore", "--data-dir", dir, backup).want(t, 0, "warning: the forget ledger", "fewer than the", "put the whole ledger back")

	// Database and ledger both lost.
	loseDatabase(t, dir)
	if err := os.Remove(ledger); err != nil {
		t.Fatal(err)
	}
	cli(t, "", nil, nil, "restore", "--data-dir", dir, backup).want(t, 0, "warning: the forget ledger", "is missing", "put the ledger back")

	// With the ledger back, as the warning says, alice stays forgotten.
	if err := os.WriteFile(ledger, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", nil, nil, "restore", "--data-dir", dir, backup).want(t, 0)
	if bytes.Contains(r.stderr, []byte("warning")) {
		t.Fatalf("a restore with the whole ledger warned:\n%s", r.stderr)
	}
	s = startServer(t, dir, serverOpts{Buckets: 4})
	if !strings.Contains(s.logs.String(), `"reapplied":1`) {
		t.Errorf("the start did not re-apply alice's forget:\n%s", tail(s.logs.String(), 20))
	}
	s.shredded(t, alice)
	s.stop()
}

// TestPostgresRefusesPlantedTrigger is route 2 on PostgreSQL: a dump
// restored with a trigger (and its function) that ignores updates of
// subjects' wrapped keys, here planted in the live database, stops the
// node's start, naming both objects and the fix; without them it starts.
func TestPostgresRefusesPlantedTrigger(t *testing.T) {
	_, dsn, dir, opts, s := startOnPostgres(t)
	alice := s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice", "c")
	s.stop()

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE FUNCTION keep_keys() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`,
		`CREATE TRIGGER keep_keys BEFORE UPDATE OF wrapped ON subjects FOR EACH ROW EXECUTE FUNCTION keep_keys()`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	refused := cli(t, "", nil, nil, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--store", dsn)
	refused.want(t, 1, "extra trigger keep_keys on subjects", "extra function keep_keys()", "restore the newest dump (pg_dump)")
	if bytes.Contains(refused.stderr, []byte("shredd restore")) {
		t.Fatalf("the refusal on PostgreSQL advises SQLite's shredd restore:\n%s", refused.stderr)
	}

	if _, err := db.Exec(`DROP TRIGGER keep_keys ON subjects; DROP FUNCTION keep_keys()`); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, dir, opts)
	s.forget(t, "alice@example.com")
	s.shredded(t, alice)
	s.stop()
}
