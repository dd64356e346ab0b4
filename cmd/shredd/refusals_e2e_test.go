package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/registry"
)

// fixRE is what a refusal's message must hold: how to fix it.
var fixRE = regexp.MustCompile(`(?i)\b(put (it )?back|restore|run |move |remove|rm |chmod|stop |start with|point |enable|create it|mv )`)

// TestRefusalsNameTheFix walks the refusal sites of a start (shredd
// serve) and of shredd restore on a data directory with data: each is
// triggered on a copy of it, and each must exit 1, name a fix in its
// message, and leave every byte of the data directory as it was. The
// list is kept by hand; a new refusal site gets a row here.
func TestRefusalsNameTheFix(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	s, _ := startAlice(t, base, serverOpts{Args: []string{"--cache-ttl", "1s"}}, "episodic", "embedding")
	preEpoch := backupTo(t, base, "pre-epoch.db")
	s.stop()
	preEpochDir := copyDir(t, base)
	s = startServer(t, base, serverOpts{Args: []string{"--cache-ttl", "1s"}})
	f := s.forget(t, "alice")
	s.runEpoch(t)
	s.waitForget(t, f.Forget, "shredded", func(v forgetView) bool { return shreddedOrLater(v.State) })
	s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "b")
	older := backupTo(t, base, "older.db")
	s.heldArtifact(t, "bob", "ann")
	newest := backupTo(t, base, "newest.db")
	s.stop()
	withWAL := copyDir(t, base)               // its segments still there
	startServer(t, base, serverOpts{}).stop() // lets the WAL's covered segments go
	other := t.TempDir()
	startServer(t, other, serverOpts{}).stop()
	// A copy from before bob that went its own way: other registrations
	// under the same sequence numbers.
	diverged := copyDir(t, preEpochDir)
	d := startServer(t, diverged, serverOpts{})
	d.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol's record", "c")
	d.seal(t, sealReq{Subject: "dave", Kind: "episodic"}, "dave's record", "d")
	d.stop()

	rm := func(names ...string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			for _, n := range names {
				if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	handCopy := func(backup string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { putDB(t, dir, readFile(t, backup)) }
	}
	serve := func(extra ...string) []string {
		return append([]string{"serve", "--data-dir", "DIR", "--addr", "127.0.0.1:0", "--buckets", "16"}, extra...)
	}
	cases := []struct {
		name string
		do   func(t *testing.T, dir string)
		args []string // the command; DIR is the data directory
		msg  string   // a part of the refusal
	}{
		{"data dir writable by others", func(t *testing.T, dir string) { os.Chmod(dir, 0o777) }, serve(), "chmod go-w"},
		{"subject.key missing", rm(node.SecretFile), serve(), "subject.key missing"},
		{"subject.key swapped", copyIn(other, node.SecretFile), serve(), "is not the one this database was made with"},
		{"attestation.key swapped alone", copyIn(other, node.AttestationKeyFile), serve(), "is not the public key of"},
		{"log.vkey missing", rm(node.LogVKeyFile), serve(), "log.vkey is missing"},
		{"log key pair of another instance", allOf(copyIn(other, node.LogKeyFile), copyIn(other, node.LogVKeyFile)), serve(), "log.key is not the one"},
		{"root.key missing", rm(node.RootFile), serve(), "is missing but the database"},
		{"root.key of another instance", copyIn(other, node.RootFile), serve(), "is not the one this database was made with"},
		{"root.key from before the epoch", copyIn(preEpochDir, node.RootFile), serve(), "root"},
		{"root.key leftover that conflicts", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, node.RootFile+".tmp-0123456789abcdef"), readFile(t, filepath.Join(other, node.RootFile)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, serve(), "root.key.tmp-0123456789abcdef"},
		{"planted trigger", func(t *testing.T, dir string) {
			plantSQL(t, dir, `CREATE TRIGGER keep BEFORE UPDATE OF wrapped ON subjects BEGIN SELECT RAISE(IGNORE); END`)
		}, serve(), "keep"},
		{"database from before the epoch, by hand", handCopy(preEpoch), serve(), "destroyed in an epoch"},
		{"database behind the WAL's mark, by hand", handCopy(older), serve(), "were acknowledged"},
		{"database missing", rm(node.DBFile, node.DBFile+"-wal", node.DBFile+"-shm"), serve(), "shredd.db is missing"},
		{"wal a symlink", func(t *testing.T, dir string) {
			w := filepath.Join(dir, registry.WALDir)
			if err := os.Rename(w, w+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(w+".real", w); err != nil {
				t.Fatal(err)
			}
		}, serve(), "symlink"},
		{"a file in wal that is not a segment", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, registry.WALDir, "notes.txt"), []byte("x"), 0o600)
		}, serve(), "notes.txt"},
		{"a damaged segment", func(t *testing.T, dir string) {
			copyIn(withWAL, registry.WALDir)(t, dir)
			segs, _ := filepath.Glob(filepath.Join(dir, registry.WALDir, "*.seg"))
			if len(segs) == 0 {
				t.Fatal("no segment to damage")
			}
			b := readFile(t, segs[0])
			b[60] ^= 0xff
			os.WriteFile(segs[0], b, 0o600)
		}, serve(), "registration WAL damaged"},
		{"wal lost, attestation.pub lost, leftover root file", allOf(rm(registry.WALDir, node.AttestationPubFile), handCopy(older), func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, node.RootFile+".tmp-00000000000000aa"), []byte("torn"), 0o600)
		}), serve(), "were acknowledged"},
		{"forget ledger lost with the database", allOf(rm(node.LedgerFile), handCopy(older)), serve(), "ledger"},
		{"forget ledger's directory missing", nil, serve("--forget-ledger", "/nonexistent-shredd-dir/forgets.ledger"), "forgets.ledger"},
		{"buckets not the tree's", nil, []string{"serve", "--data-dir", "DIR", "--addr", "127.0.0.1:0", "--buckets", "8"}, "start with --buckets 16"},
		{"restore: backup behind the WAL's mark", nil, []string{"restore", "--data-dir", "DIR", older}, "Nothing was replaced"},
		{"restore: backup from before the epoch", nil, []string{"restore", "--data-dir", "DIR", preEpoch}, "before the root's last epoch"},
		{"restore: another instance's backup", nil, []string{"restore", "--data-dir", "DIR", "OTHER"}, "belongs to another data directory"},
		{"restore: no manifest", nil, []string{"restore", "--data-dir", "DIR", "NOMANIFEST"}, "no manifest"},
		{"restore: flipped bit", nil, []string{"restore", "--data-dir", "DIR", "FLIPPED"}, "restore another backup"},
		{"another copy's segments", func(t *testing.T, dir string) { copyIn(diverged, registry.WALDir)(t, dir) }, serve(), "another copy's"},
		{"wal accept-loss with another copy's segments", func(t *testing.T, dir string) { copyIn(diverged, registry.WALDir)(t, dir) }, []string{"wal", "accept-loss", "--data-dir", "DIR"}, "another copy's"},
	}
	otherBackup := backupTo(t, other, "other.db")
	noManifest := filepath.Join(t.TempDir(), "nomanifest.db")
	os.WriteFile(noManifest, readFile(t, newest), 0o600)
	flipped := writeBackupFiles(t, readFile(t, newest), readFile(t, newest+".manifest"))
	fb := readFile(t, flipped)
	fb[len(fb)/2] ^= 1
	os.WriteFile(flipped, fb, 0o600)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, base)
			if c.do != nil {
				c.do(t, dir)
			}
			args := slicesClone(c.args)
			for i, a := range args {
				switch a {
				case "DIR":
					args[i] = dir
				case "OTHER":
					args[i] = otherBackup
				case "NOMANIFEST":
					args[i] = noManifest
				case "FLIPPED":
					args[i] = flipped
				}
			}
			before := dirState(t, dir)
			r := cli(t, "", nil, nil, args...)
			if r.code != 1 {
				t.Fatalf("%v: exit %d, want a refusal (1)\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
			}
			msg := string(r.stderr)
			if !strings.Contains(msg, c.msg) {
				t.Fatalf("the refusal does not mention %q:\n%s", c.msg, msg)
			}
			last := lastLine(msg)
			if !fixRE.MatchString(last) {
				t.Fatalf("the refusal names no fix:\n%s", last)
			}
			if after := dirState(t, dir); after != before {
				t.Fatalf("the refusal changed the data directory:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// lastLine is the last non-empty line of s (a refusal's message, after the
// log lines that may precede it).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestCheckCommandsChangeNothing: shredd wal check and shredd ledger check
// read the data directory without changing a byte, even on a database
// restored by shredd restore (not yet in WAL mode).
func TestCheckCommandsChangeNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := startAlice(t, dir, serverOpts{}, "episodic")
	b := backupTo(t, dir, "b.db")
	s.stop()
	cli(t, "", nil, nil, "restore", "--data-dir", dir, b).want(t, 0)
	for _, args := range [][]string{{"wal", "check"}, {"ledger", "check"}} {
		before := dirState(t, dir)
		cli(t, "", nil, nil, append(args, "--data-dir", dir)...).want(t, 0)
		if after := dirState(t, dir); after != before {
			t.Fatalf("shredd %v changed the data directory:\nbefore:\n%s\nafter:\n%s", args, before, after)
		}
	}
}

// TestMarkKeptWithoutTraffic: the registration WAL's mark reaches the last
// acknowledged registration about a second after it, whether more come or
// not, so that losing the segments then is a refused start, not a silent
// loss.
func TestMarkKeptWithoutTraffic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir, serverOpts{})
	s.putKinds(t, "episodic", "embedding")
	s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "one", "a")
	time.Sleep(1500 * time.Millisecond)
	s.heldArtifact(t, "alice", "ann")
	s.heldArtifact(t, "alice", "ann") // the third registration, then nothing more
	deadline := time.Now().Add(hang)
	for {
		if m, ok := readMarkFile(t, dir); ok && m.Seq == 3 {
			break
		}
		if time.Now().After(deadline) {
			m, _ := readMarkFile(t, dir)
			t.Fatalf("the mark did not reach the last registration without more traffic: %+v", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.cmd.Process.Kill()
	s.waitKilled()
	if err := os.RemoveAll(filepath.Join(dir, registry.WALDir)); err != nil {
		t.Fatal(err)
	}
	// The database may hold them (folded) or not: either every
	// registration is there, or the start names the missing ones.
	p := startProcess(t, dir, serverOpts{})
	if p.waitListening() {
		p.stop()
		return // every registration was in the database already
	}
	if !strings.Contains(p.logs.String(), "were acknowledged") {
		t.Fatalf("a start without the WAL's segments: %v\n%s", p.waitErr, p.logs)
	}
}

// TestFencedProcessAnswersNothing is route 1 beneath the lock, for a
// process that writes nothing to the root: once another process claimed
// root.key, every call answers 503 within a few seconds.
func TestFencedProcessAnswersNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, rec := startAlice(t, dir, serverOpts{}, "episodic", "embedding")
	claimRootFile(t, dir)
	deadline := time.Now().Add(hang)
	for {
		r := s.do(t, http.MethodPost, "/v1/artifacts", sealReq{Subject: "alice", Kind: "embedding", Holder: "ann"})
		if r.Status == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a fenced process still registers: %d %s", r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.expectProblem(t, http.StatusServiceUnavailable, "backend_unavailable", http.MethodPost, "/v1/decrypt", decryptReq(rec))
	s.expectProblem(t, http.StatusServiceUnavailable, "backend_unavailable", http.MethodPost, "/v1/forget", map[string]any{"subject": "alice"})
	s.expectProblem(t, http.StatusServiceUnavailable, "not_ready", http.MethodGet, "/readyz", nil)
	s.stop()
}
