package main

// Nothing acknowledged vanishes (issue 44): a second process on the data
// directory, registrations acknowledged after a backup, an empty WAL
// segment, refused starts that changed files, another instance's root
// file. Each route runs the real binary.

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/registry"
)

// heldArtifact registers a plaintext-held artifact of subject with
// holder and returns its id.
func (s *server) heldArtifact(t *testing.T, subject, holder string) string {
	t.Helper()
	var out struct {
		Artifact string `json:"artifact"`
	}
	s.expect(t, http.StatusCreated, http.MethodPost, "/v1/artifacts",
		sealReq{Subject: subject, Kind: "embedding", Holder: holder}).into(t, &out)
	return out.Artifact
}

// rootFile is the parts of root.key these tests read.
type rootFile struct {
	Instance   string                     `json:"instance"`
	Generation uint64                     `json:"generation"`
	Latest     int                        `json:"latest"`
	MinVersion int                        `json:"min_version"`
	Destroyed  []int                      `json:"destroyed"`
	Marks      map[string]json.RawMessage `json:"marks"`
}

// liveDirState is dirState of a directory a server is running on: its
// database files (which the server writes in the background) by name and
// mode only.
func liveDirState(t *testing.T, dir string) string {
	t.Helper()
	lines := strings.Split(dirState(t, dir), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "/"+node.DBFile) {
			name, _, _ := strings.Cut(l, " -")
			mode := strings.Fields(l)[1]
			lines[i] = name + " " + mode
		}
	}
	return strings.Join(lines, "\n")
}

func readRootFile(t *testing.T, dir string) rootFile {
	t.Helper()
	var f rootFile
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, node.RootFile)), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSecondWriterRefused is route 1: the lock is the directory itself,
// so removing any file of the data directory does not let a second
// server start beside the first; and a root file another process claimed
// is never written over from this one's memory.
func TestSecondWriterRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, alice := startAlice(t, dir, serverOpts{}, "episodic")
	// A cleanup script removes what looks like a lock file, and anything
	// else that is not a key.
	os.Remove(filepath.Join(dir, "lock"))
	// A is running: its database files change as it works in the
	// background (its fold, the database's page flush), so they are
	// compared by name and mode; every other file byte for byte, once A
	// has kept the mark of alice's registration (A's last write of
	// root.key and of the WAL until the next request).
	deadline := time.Now().Add(hang)
	for m, ok := readMarkFile(t, dir); !ok || m.Seq < 1; m, ok = readMarkFile(t, dir) {
		if time.Now().After(deadline) {
			t.Fatal("A did not keep the mark of alice's registration")
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := liveDirState(t, dir)
	cli(t, "", nil, nil, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0").want(t, 1, "in use by another shredd process", "stop it first")
	if after := liveDirState(t, dir); after != before {
		t.Fatalf("a second server changed the data directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The writer generation was raised by A's start, and A's epoch keeps
	// writing the root: the file is A's.
	gen := readRootFile(t, dir).Generation
	if gen == 0 || readRootFile(t, dir).Instance == "" {
		t.Fatalf("root.key after a start: %+v", readRootFile(t, dir))
	}
	f := a.forget(t, "alice")
	a.runEpoch(t)
	a.waitForget(t, f.Forget, "shredded", func(v forgetView) bool { return shreddedOrLater(v.State) })
	rf := readRootFile(t, dir)
	if rf.Generation != gen || rf.MinVersion != 2 || len(rf.Destroyed) != 1 || rf.Destroyed[0] != 1 {
		t.Fatalf("root.key after A's epoch: %+v", rf)
	}
	a.stop()
	// The next start claims the root again (one generation up) and the
	// forgotten record stays shredded.
	b := startServer(t, dir, serverOpts{})
	if g := readRootFile(t, dir).Generation; g != gen+1 {
		t.Fatalf("generation after the next start: %d, want %d", g, gen+1)
	}
	b.shredded(t, alice)
	b.stop()
}

// TestRootFileFenced is route 1 beneath the lock: a root file changed by
// another process (here, a copy from before an epoch written back while
// the server runs) is never overwritten from the server's memory; its
// next epoch fails, /readyz answers 503, and the file stays as found.
func TestRootFileFenced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := startAlice(t, dir, serverOpts{}, "episodic")
	s.expect(t, http.StatusOK, http.MethodGet, "/readyz", nil)
	p := filepath.Join(dir, node.RootFile)
	b := claimRootFile(t, dir)
	r := s.do(t, http.MethodPost, "/v1/epoch", nil)
	if r.Status < 500 {
		t.Fatalf("an epoch over a root file another process claimed: %d %s", r.Status, r.Body)
	}
	if got := readFile(t, p); string(got) != string(b) {
		t.Fatalf("the server wrote a root file another process claimed:\n%s", got)
	}
	s.expectProblem(t, http.StatusServiceUnavailable, "not_ready", http.MethodGet, "/readyz", nil)
	if !strings.Contains(s.logs.String(), "another process claimed it") {
		t.Fatalf("no log line names the fence:\n%s", tail(s.logs.String(), 20))
	}
	s.stop()
}

// TestAcknowledgedRegistrationsKept is route 2: registrations acknowledged
// after a backup are never lost without a word. A restore of the older
// backup once a newer one let the WAL go is refused at start with what is
// missing and the fix, changing nothing; so is a start on a lost
// database. The fix (the newest backup) brings every registration back;
// an accepted loss is stated in every later attestation.
func TestAcknowledgedRegistrationsKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := startAlice(t, dir, serverOpts{}, "episodic", "embedding")
	b1 := backupTo(t, dir, "b1.db")
	held := s.heldArtifact(t, "alice", "ann")
	rec := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's second record", "a2")
	b2 := backupTo(t, dir, "b2.db")
	s.stop()
	// The restart folds and lets go of the segments the newest backup
	// covers.
	s = startServer(t, dir, serverOpts{})
	s.expect(t, http.StatusOK, http.MethodGet, "/v1/artifacts/"+held, nil)
	s.stop()

	t.Run("older backup restored", func(t *testing.T) {
		// shredd restore refuses it before it replaces anything.
		before := dirState(t, dir)
		cli(t, "", nil, nil, "restore", "--data-dir", dir, b1).want(t, 1, "does not hold 2 to 3", "Nothing was replaced", "--accept-loss")
		if after := dirState(t, dir); after != before {
			t.Fatalf("a refused restore changed the data directory:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		// A hand copy of the older backup put in place: the start refuses.
		live := readFile(t, filepath.Join(dir, node.DBFile))
		putDB(t, dir, readFile(t, b1))
		refusedUnchanged(t, dir, "were acknowledged", "neither in the database", "nothing was changed", "shredd wal accept-loss", "shredd restore")
		cli(t, "", nil, nil, "wal", "check", "--data-dir", dir).want(t, 1, "were acknowledged")
		putDB(t, dir, live)
		// The newest backup holds them.
		cli(t, "", nil, nil, "restore", "--data-dir", dir, b2).want(t, 0)
		if r := cli(t, "", nil, nil, "wal", "check", "--data-dir", dir).want(t, 0); !strings.Contains(string(r.stdout), "every registration") {
			t.Fatalf("shredd wal check after the newest backup: %s", r.stdout)
		}
		s := startServer(t, dir, serverOpts{})
		s.expect(t, http.StatusOK, http.MethodGet, "/v1/artifacts/"+held, nil)
		s.open(t, rec)
		s.stop()
	})
	t.Run("lost database", func(t *testing.T) {
		s := startServer(t, dir, serverOpts{}) // checkpoints its WAL at stop
		s.stop()
		saved := readFile(t, filepath.Join(dir, node.DBFile))
		loseDatabase(t, dir)
		refusedUnchanged(t, dir, "shredd.db is missing", "acknowledged", "Restore the newest backup")
		putDB(t, dir, saved)
	})
	t.Run("accepted loss", func(t *testing.T) {
		r := cli(t, "", nil, nil, "restore", "--accept-loss", "--data-dir", dir, b1).want(t, 0)
		if !strings.Contains(string(r.stdout), "are lost") {
			t.Fatalf("shredd restore --accept-loss: %s", r.stdout)
		}
		cli(t, "", nil, nil, "wal", "check", "--data-dir", dir).want(t, 0)
		s := startServer(t, dir, serverOpts{Args: []string{"--cache-ttl", "1s"}})
		s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, "/v1/artifacts/"+held, nil)
		f := s.forget(t, "alice")
		s.runEpoch(t)
		s.waitForget(t, f.Forget, "erased", func(v forgetView) bool { return v.State == "erased" })
		att := s.expect(t, http.StatusOK, http.MethodGet, "/v1/forgets/"+f.Forget+"/attestation", nil)
		if !strings.Contains(decodeDSSE(t, att.Body), `"lost_registrations"`) {
			t.Fatalf("the attestation after an accepted loss does not state it:\n%s", decodeDSSE(t, att.Body))
		}
		s.stop()
	})
}

// TestWALAcceptLoss: shredd wal accept-loss records a loss the start
// refused, and the start then serves.
func TestWALAcceptLoss(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := startAlice(t, dir, serverOpts{}, "episodic", "embedding")
	s.stop()
	copyDB := readFile(t, filepath.Join(dir, node.DBFile))
	s = startServer(t, dir, serverOpts{})
	held := s.heldArtifact(t, "alice", "ann")
	s.stop()
	// Segments lost, and a hand copy of the database from before.
	if err := os.RemoveAll(filepath.Join(dir, registry.WALDir)); err != nil {
		t.Fatal(err)
	}
	putDB(t, dir, copyDB)
	refusedUnchanged(t, dir, "were acknowledged")
	cli(t, "", nil, nil, "wal", "check", "--data-dir", dir).want(t, 1, "were acknowledged")
	if r := cli(t, "", nil, nil, "wal", "accept-loss", "--data-dir", dir).want(t, 0); !strings.Contains(string(r.stdout), "are lost") {
		t.Fatalf("shredd wal accept-loss: %s", r.stdout)
	}
	m, _ := readMarkFile(t, dir)
	if len(m.Lost) != 1 || m.Lost[0].To < m.Lost[0].From {
		t.Fatalf("the mark after accept-loss: %+v", m)
	}
	s = startServer(t, dir, serverOpts{})
	s.expectProblem(t, http.StatusNotFound, "not_found", http.MethodGet, "/v1/artifacts/"+held, nil)
	s.stop()
}

// TestEmptySegmentRecovered is route 3: a crash between creating a WAL
// segment and writing its first frame leaves an empty segment; the next
// start appends to it instead of answering 503 forever.
func TestEmptySegmentRecovered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{})
	s.putKinds(t, "episodic")
	s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "one", "a")
	s.stop()
	// The next segment, as a crash right after its creation leaves it.
	m, ok := readMarkFile(t, dir)
	if !ok {
		t.Fatal("no registration mark in root.key after a registration")
	}
	empty := filepath.Join(dir, registry.WALDir, segFileName(m.Seq+1))
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, dir, serverOpts{})
	rec := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "two", "b")
	s.expect(t, http.StatusOK, http.MethodGet, "/readyz", nil)
	s.stop()
	s = startServer(t, dir, serverOpts{})
	s.open(t, rec)
	s.stop()
}

// TestAnotherInstancesRootRefused is route 5: another instance's
// root.key, or a brand-new one, in place of this one's is a refused start
// that names the root file and the fix, and changes nothing.
func TestAnotherInstancesRootRefused(t *testing.T) {
	t.Parallel()
	dir, other := t.TempDir(), t.TempDir()
	s, alice := startAlice(t, dir, serverOpts{}, "episodic")
	s.forget(t, "carol")
	s.stop()
	o := startServer(t, other, serverOpts{})
	o.stop()
	p := filepath.Join(dir, node.RootFile)
	mine := readFile(t, p)
	if err := os.WriteFile(p, readFile(t, filepath.Join(other, node.RootFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, dir, "root.key", "is not the one this database was made with", "Put back the root.key")
	if err := os.WriteFile(p, mine, 0o600); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, dir, serverOpts{})
	s.open(t, alice)
	s.stop()
}

// TestRefusedStartLeavesNoLedger is route 4's smaller case: a start
// refused after the ledger was opened leaves no forgets.ledger behind.
func TestRefusedStartLeavesNoLedger(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := startAlice(t, dir, serverOpts{}, "episodic")
	backup := backupTo(t, dir, "b.db")
	s.forget(t, "alice")
	s.stop()
	// The ledger and the database lost together, the database restored
	// from before the forget: the start is refused, the forget being lost.
	if err := os.Remove(filepath.Join(dir, node.LedgerFile)); err != nil {
		t.Fatal(err)
	}
	cli(t, "", nil, nil, "restore", "--data-dir", dir, backup).want(t, 0)
	refusedUnchanged(t, dir, "ledger")
	if _, err := os.Lstat(filepath.Join(dir, node.LedgerFile)); !os.IsNotExist(err) {
		t.Fatalf("a refused start left %s: %v", node.LedgerFile, err)
	}
}

// readMarkFile reads the registration WAL's mark from root.key.
func readMarkFile(t *testing.T, dir string) (registry.Mark, bool) {
	t.Helper()
	raw, ok := readRootFile(t, dir).Marks[registry.MarkStream]
	if !ok {
		return registry.Mark{}, false
	}
	var m registry.Mark
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m, true
}

func segFileName(first uint64) string {
	const hexdigits = "0123456789abcdef"
	b := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		b[i] = hexdigits[first&0xf]
		first >>= 4
	}
	return string(b) + ".seg"
}

// decodeDSSE returns the payload of a DSSE envelope (the in-toto
// statement) as text.
func decodeDSSE(t *testing.T, body []byte) string {
	t.Helper()
	var env struct {
		Payload []byte `json:"payload"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("attestation envelope: %v\n%s", err, body)
	}
	return string(env.Payload)
}

// TestOldRootAndOldDatabaseRefused: root.key and the database both put
// back from before a forget and its epoch agree with each other, but not
// with the forget ledger, whose compaction dropped the forget's line when
// the epoch destroyed its key: the start is refused as a root older than
// the ledger (never advised to repair the ledger), and a repair that
// accepts losses is refused too, so the forgotten record never opens.
func TestOldRootAndOldDatabaseRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := startAlice(t, dir, serverOpts{}, "episodic")
	s.stop()
	oldRoot := readFile(t, filepath.Join(dir, node.RootFile))
	b := backupTo(t, dir, "b.db")
	s = startServer(t, dir, serverOpts{})
	f := s.forget(t, "alice")
	s.runEpoch(t)
	s.waitForget(t, f.Forget, "shredded", func(v forgetView) bool { return shreddedOrLater(v.State) })
	s.stop()
	if err := os.WriteFile(filepath.Join(dir, node.RootFile), oldRoot, 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, "", nil, nil, "restore", "--data-dir", dir, b).want(t, 0)
	refusedUnchanged(t, dir, "older than the ledger", "Put back the live root.key")
	// The ledger is whole: a repair that accepts losses has nothing to do,
	// and the start after it is refused all the same.
	before := dirState(t, dir)
	cli(t, "", nil, nil, "ledger", "repair", "--accept-loss", "--data-dir", dir)
	if after := dirState(t, dir); after != before {
		t.Fatalf("shredd ledger repair changed the data directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	refusedUnchanged(t, dir, "older than the ledger")
}

// claimRootFile raises the writer generation of dir's root.key, as
// another process's claim does, and returns the file's new bytes.
func claimRootFile(t *testing.T, dir string) []byte {
	t.Helper()
	p := filepath.Join(dir, node.RootFile)
	var f map[string]any
	if err := json.Unmarshal(readFile(t, p), &f); err != nil {
		t.Fatal(err)
	}
	f["generation"] = f["generation"].(float64) + 1
	b, _ := json.Marshal(f)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// putDB puts b in place of dir's database by hand (no shredd restore),
// with no WAL file of the database it replaces.
func putDB(t *testing.T, dir string, b []byte) {
	t.Helper()
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(filepath.Join(dir, node.DBFile+suffix))
	}
	if err := os.WriteFile(filepath.Join(dir, node.DBFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// allOf is one mutation of a data directory made of several, in order.
func allOf(fs ...func(t *testing.T, dir string)) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		for _, f := range fs {
			f(t, dir)
		}
	}
}

// copyIn is a mutation that puts from's files or folders names in place
// of dir's (another instance's, an older copy's), with the modes shredd
// requires.
func copyIn(from string, names ...string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		for _, n := range names {
			os.RemoveAll(filepath.Join(dir, n))
			if err := os.CopyFS(filepath.Join(dir, n), os.DirFS(filepath.Join(from, n))); err != nil {
				// A file, not a directory.
				b, err := os.ReadFile(filepath.Join(from, n))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			fixModes(t, filepath.Join(dir, n))
		}
	}
}

// fixModes gives a copied file or tree the modes shredd requires (0600
// files, 0700 directories).
func fixModes(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			return os.Chmod(p, 0o700)
		}
		return os.Chmod(p, 0o600)
	})
}
