package main

// Crash tests: the real binary, built with the crashpoints tag, is killed
// with SIGKILL at every named durable step (internal/crashpoint), then
// restarted normally on the same data directory, and the invariants of
// docs/operations.md ("Crash safety") are checked.

import (
	"bytes"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/translog"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// crashDrive is what makes the server reach a step.
type crashDrive int

const (
	driveForget     crashDrive = iota // POST /v1/forget (the step is in the request or the re-key it kicks)
	driveEpoch                        // POST /v1/epoch, after a forget re-keyed on a normal run
	driveEncryptNew                   // encrypt for a subject without a key yet
	driveEncrypt                      // encrypt for a subject with a key
	driveCheckpoint                   // an encrypt, then GET /v1/log/checkpoint (a new tree size is signed)
	driveTokenCLI                     // `shredd token create` on the data directory
	driveBackupCLI                    // `shredd backup --dir` of the data directory
	driveFirstStart                   // the first start of a new data directory
	driveErase                        // POST /v1/epoch, then the verify that erases mallory's forget (cache TTL 1ns)
	driveRepair                       // a start that repairs a torn last ledger line (ledger_e2e_test.go)
	driveFold                         // encrypt for a subject with a key: the answer may come before the death (the fold follows it)
	driveRestart                      // a start of the data directory a normal run wrote (it removes the folded WAL segments)
	driveReinstate                    // driveErase, then the reinstatement of mallory (her forget erased)
)

// crashSteps are every step crashpoint.Hit names in the code (checked by
// TestCrashStepsListed), with how the test reaches it and on which root
// stores.
var crashSteps = []struct {
	step   string
	drive  crashDrive
	local  bool // with --root local
	vault  bool // with --root vault
	perSub bool // with --subject-keys transit (needs vault)
}{
	{"forget:committed", driveForget, true, false, false},
	{"ledger:appended", driveForget, true, false, false},
	{"ledger:created", driveFirstStart, true, false, false},
	{"ledger:compacted", driveEpoch, true, false, false},
	{"ledger:headkept", driveEpoch, true, false, false}, // with a Vault root no head is kept: the forget records are
	{"ledger:cut", driveRepair, true, false, false},
	{"rekey:chunk", driveForget, true, false, false},
	{"rekey:committed", driveForget, true, false, false},
	{"forget:rekeyed", driveForget, true, false, false},
	{"subject:destroyed", driveForget, false, true, true},
	{"epoch:started", driveEpoch, true, true, false},
	{"epoch:rotated", driveEpoch, true, true, false},
	{"localroot:synced", driveEpoch, true, false, false},
	{"localroot:renamed", driveEpoch, true, false, false},
	{"localroot:claimsynced", driveRestart, true, false, false},
	{"localroot:claimed", driveRestart, true, false, false},
	{"wal:markkept", driveFold, true, false, false},
	{"epoch:rewrapped", driveEpoch, true, true, false},
	{"epoch:trimmed", driveEpoch, true, true, false},
	{"log:appended", driveEpoch, true, true, false},
	{"epoch:done", driveEpoch, true, true, false},
	{"key:created", driveEncryptNew, true, false, false},
	{"wal:appended", driveEncrypt, true, false, false},
	{"wal:synced", driveEncrypt, true, false, false},
	{"wal:folded", driveFold, true, false, false},
	{"wal:truncated", driveRestart, true, false, false},
	{"log:checkpoint", driveCheckpoint, true, false, false},
	{"token:created", driveTokenCLI, true, false, false},
	{"backup:written", driveBackupCLI, true, false, false},
	{"forget:erased", driveErase, true, false, false},
	{"admintoken:written", driveFirstStart, true, false, false},
	{"token:imported", driveFirstStart, true, false, false},
	{"reinstate:committed", driveReinstate, true, false, false},
}

var hitRE = regexp.MustCompile(`crashpoint\.Hit\("([^"]+)"\)`)

// codeSteps returns the step names of the crashpoint.Hit calls in the
// module's Go files (tests left out).
func codeSteps(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git" || d.Name() == "tools" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range hitRE.FindAllSubmatch(b, -1) {
			seen[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// TestCrashStepsListed: every step in the code is in crashSteps and every
// listed step is in the code, so the crash test covers them all (and
// TestCrashRecovery fails for a listed step no code reaches).
func TestCrashStepsListed(t *testing.T) {
	code := codeSteps(t)
	var listed []string
	for _, c := range crashSteps {
		listed = append(listed, c.step)
	}
	sort.Strings(listed)
	if !slices.Equal(code, listed) {
		t.Fatalf("crash points in the code:\n  %v\nlisted in crashSteps:\n  %v", code, listed)
	}
}

// crashWorld is what the clients of one data directory were told: the
// records and forgets acknowledged, and the checkpoints handed out.
type crashWorld struct {
	live        []record
	gone        []record // records of subjects whose forget was acknowledged (or is known committed)
	forgets     []string // acknowledged forget ids
	checkpoints [][]byte // signed checkpoints handed out
	vkey        note.Verifier
}

// saveCheckpoint fetches and keeps the current checkpoint.
func (w *crashWorld) saveCheckpoint(t *testing.T, s *server) {
	t.Helper()
	r := s.expect(t, http.StatusOK, http.MethodGet, "/v1/log/checkpoint", nil)
	if w.vkey == nil {
		v, err := note.NewVerifier(strings.TrimSpace(string(s.expect(t, http.StatusOK, http.MethodGet, "/v1/log/key", nil).Body)))
		if err != nil {
			t.Fatal(err)
		}
		w.vkey = v
	}
	w.checkpoints = append(w.checkpoints, r.Body)
}

// checkDBIntegrity runs PRAGMA integrity_check on the data directory's
// database, read-only, while no process has it open.
func checkDBIntegrity(t *testing.T, dir string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, node.DBFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`PRAGMA integrity_check`)
	if err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	defer rows.Close()
	var res []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		res = append(res, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0] != "ok" {
		t.Fatalf("integrity_check of %s after the kill: %v", node.DBFile, res)
	}
}

// checkInvariants checks, on a server restarted after a kill, what every
// client was told before it: live records open, forgotten ones answer 410,
// acknowledged forgets are committed or later, and the log is consistent
// with every checkpoint handed out.
func (w *crashWorld) checkInvariants(t *testing.T, s *server) {
	t.Helper()
	for _, rec := range w.live {
		s.open(t, rec)
	}
	for _, rec := range w.gone {
		s.shredded(t, rec)
	}
	for _, id := range w.forgets {
		f := s.getForget(t, id)
		if f.CommittedAt == nil || (f.State != "committed" && !shreddedOrLater(f.State)) {
			t.Fatalf("acknowledged forget %s after the restart: %+v", id, f)
		}
	}
	if len(w.checkpoints) == 0 {
		return
	}
	now, err := translog.OpenCheckpoint(s.expect(t, http.StatusOK, http.MethodGet, "/v1/log/checkpoint", nil).Body, w.vkey)
	if err != nil {
		t.Fatalf("checkpoint after the restart: %v", err)
	}
	for _, signed := range w.checkpoints {
		old, err := translog.OpenCheckpoint(signed, w.vkey)
		if err != nil {
			t.Fatalf("a checkpoint handed out before the kill: %v", err)
		}
		if old.Size > now.Size {
			t.Fatalf("the log shrank: a checkpoint of size %d was handed out, now %d", old.Size, now.Size)
		}
		r := s.expect(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/log/consistency?old=%d&new=%d", old.Size, now.Size), nil)
		p, err := translog.ParseConsistencyProof(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if err := translog.CheckConsistency(old, now, p.Hashes); err != nil {
			t.Fatalf("the log after the restart is not an extension of the checkpoint of size %d: %v", old.Size, err)
		}
	}
}

// killedAt waits for s to die by SIGKILL and checks that it died at step.
func (s *server) killedAt(t *testing.T, step string) {
	t.Helper()
	s.waitKilled()
	if want := "crashpoint: killed at " + step + "\n"; !strings.Contains(s.logs.String(), want) {
		t.Fatalf("the server died, not at %s:\n%s", step, tail(s.logs.String(), 30))
	}
}

// runCrashingCLI runs a shredd subcommand with SHREDD_TEST_CRASH_AT=step and
// checks that it died there.
func runCrashingCLI(t *testing.T, step string, args ...string) {
	t.Helper()
	cmd := exec.Command(shreddBinary(t), args...)
	cmd.Env = append(envWithoutShredd(), "SHREDD_TEST_CRASH_AT="+step)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("shredd %s still running after 60s", strings.Join(args, " "))
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || !strings.Contains(out.String(), "crashpoint: killed at "+step+"\n") {
		t.Fatalf("shredd %s ended with %v, want death by SIGKILL at %s:\n%s", strings.Join(args, " "), cmd.ProcessState, step, out.String())
	}
}

// TestCrashRecovery kills the server with SIGKILL at every durable step
// (crashSteps), on each root store the step exists on, restarts it and
// checks the invariants (crashWorld.checkInvariants, PRAGMA
// integrity_check), then that the state converges: forgets shredded by at
// most two epochs, everything still right after a clean restart.
func TestCrashRecovery(t *testing.T) {
	for _, tc := range crashSteps {
		for _, root := range []string{"local", "vault"} {
			if (root == "local" && !tc.local) || (root == "vault" && !tc.vault) {
				continue
			}
			t.Run(strings.ReplaceAll(tc.step, ":", "_")+"/"+root, func(t *testing.T) {
				t.Parallel()
				opts := serverOpts{Buckets: 1}
				if root == "vault" {
					srv := newVault(t)
					opts = vaultOpts(srv, "transit", "shredd-root")
					opts.Buckets = 1
					if tc.perSub {
						opts.Args = append(opts.Args, "--subject-keys", "transit")
					}
				}
				if tc.drive == driveFirstStart {
					testCrashAtFirstStart(t, tc.step, opts)
					return
				}
				if tc.drive == driveRepair {
					testCrashAtLedgerRepair(t, tc.step, opts)
					return
				}
				testCrashAt(t, tc.step, tc.drive, opts, tc.perSub)
			})
		}
	}
}

func testCrashAt(t *testing.T, step string, drive crashDrive, opts serverOpts, perSub bool) {
	dir := t.TempDir()
	crash := opts
	crash.Env = append(slices.Clone(opts.Env), "SHREDD_TEST_CRASH_AT="+step)
	if drive == driveErase || drive == driveReinstate {
		crash.Args = append(slices.Clone(opts.Args), "--cache-ttl", "1ns") // the read path converges at once
	}
	w := &crashWorld{}

	// On a normal run: records of many subjects in the one bucket (more
	// than a re-key chunk of 32), and mallory's forget acknowledged.
	s := startServer(t, dir, opts)
	s.putKinds(t, "episodic", "summary")
	for i := 0; i < 36; i++ {
		subj := "subject-" + strconv.Itoa(i)
		w.live = append(w.live, s.seal(t, sealReq{Subject: subj, Kind: "episodic"}, "record of "+subj, "ctx-"+subj))
	}
	for _, subj := range []string{"bob", "carol", "dave@example.com", "0123456789"} {
		w.live = append(w.live, s.seal(t, sealReq{Subject: subj, Kind: "episodic"}, "record of "+subj, "ctx-"+subj))
	}
	w.live = append(w.live, s.seal(t, sealReq{Subjects: []string{"bob", "carol"}, Parents: []string{w.live[39].artifact}, Kind: "summary"}, "bob+carol+digits", "agg"))
	m := s.seal(t, sealReq{Subject: "mallory", Kind: "episodic"}, "record of mallory", "ctx-mallory")
	w.gone = append(w.gone, m, s.seal(t, sealReq{Subject: "bob", Parents: []string{m.artifact}, Kind: "summary"}, "mallory's derivative", "m"))
	a := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "record of alice", "ctx-alice")
	alice := []record{a,
		s.seal(t, sealReq{Subject: "bob", Parents: []string{a.artifact}, Kind: "summary"}, "alice's derivative", "d"),
		s.seal(t, sealReq{Subjects: []string{"carol", "alice"}, Kind: "summary"}, "alice+carol", "agg2")}
	f := s.forget(t, "mallory")
	w.forgets = append(w.forgets, f.Forget)
	s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	w.saveCheckpoint(t, s)
	aliceForget := ""
	if drive == driveEpoch {
		f := s.forget(t, "alice")
		w.forgets = append(w.forgets, f.Forget)
		w.gone = append(w.gone, alice...)
		aliceForget = f.Forget
		s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
		w.saveCheckpoint(t, s)
	} else {
		w.live = append(w.live, alice...)
	}
	s.stop()

	// The run that dies at step.
	switch drive {
	case driveTokenCLI:
		runCrashingCLI(t, step, "token", "create", "--data-dir", dir, "--name", "crash", "--scopes", "encrypt")
	case driveBackupCLI:
		runCrashingCLI(t, step, "backup", "--data-dir", dir, "--dir", filepath.Join(t.TempDir(), "backups"))
	case driveRestart:
		s = startProcess(t, dir, crash)
		s.killedAt(t, step)
	default:
		s = startServer(t, dir, crash)
		if drive != driveCheckpoint && drive != driveEncrypt && drive != driveFold {
			// Something written by the crashing run must survive too.
			w.live = append(w.live, s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob in the crashing run", "ctx-bob-2"))
			w.saveCheckpoint(t, s)
		}
		switch drive {
		case driveForget:
			// forget:committed dies inside the request; the later steps
			// die in the background work the forget kicks, before or
			// after the reply. The commit precedes every one of them.
			r, err := s.call(http.MethodPost, "/v1/forget", map[string]string{"subject": "alice"})
			if err == nil {
				var f forgetView
				if r.Status != http.StatusAccepted {
					t.Fatalf("forget: %d %s", r.Status, r.Body)
				}
				r.into(t, &f)
				if f.State != "committed" {
					t.Fatalf("forget: %+v", f)
				}
				w.forgets = append(w.forgets, f.Forget)
				aliceForget = f.Forget
			}
			w.gone = append(w.gone, alice...)
			w.live = slices.DeleteFunc(w.live, func(r record) bool {
				return slices.ContainsFunc(alice, func(a record) bool { return a.artifact == r.artifact })
			})
		case driveEpoch:
			_, _ = s.call(http.MethodPost, "/v1/epoch", nil)
		case driveErase:
			// The epoch shreds mallory's forget; the verify (or the
			// background work's, whichever comes first) erases it.
			_, _ = s.call(http.MethodPost, "/v1/epoch", nil)
			_, _ = s.call(http.MethodPost, "/v1/forgets/"+w.forgets[0]+"/verify", nil)
		case driveReinstate:
			// Mallory's forget erased, then her reinstatement, which
			// dies after its commit, before its answer.
			_, _ = s.call(http.MethodPost, "/v1/epoch", nil)
			s.waitForget(t, w.forgets[0], "erased", func(f forgetView) bool {
				_, _ = s.call(http.MethodPost, "/v1/forgets/"+w.forgets[0]+"/verify", nil)
				return f.State == "erased"
			})
			if r, err := s.call(http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": "mallory"}); err == nil {
				t.Fatalf("reinstate answered %d %s, want the server dead at %s", r.Status, r.Body, step)
			}
		case driveEncryptNew, driveEncrypt:
			subj := "zed"
			if drive == driveEncrypt {
				subj = "carol"
			}
			req := sealReq{Subject: subj, Kind: "episodic", Plaintext: b64("lost"), Context: b64(""), Unit: writeUnit}
			if r, err := s.call(http.MethodPost, "/v1/encrypt", req); err == nil {
				t.Fatalf("encrypt answered %d %s, want the server dead at %s", r.Status, r.Body, step)
			}
		case driveFold:
			// Acknowledged once in the WAL: an answer that came before the
			// death must open after the restart.
			req := sealReq{Subject: "carol", Kind: "episodic", Plaintext: b64("acknowledged"), Context: b64(""), Unit: writeUnit}
			if r, err := s.call(http.MethodPost, "/v1/encrypt", req); err == nil {
				if r.Status != http.StatusOK {
					t.Fatalf("encrypt: %d %s", r.Status, r.Body)
				}
				var out sealed
				r.into(t, &out)
				w.live = append(w.live, record{name: "acknowledged", ciphertext: out.Ciphertext, plaintext: "acknowledged", artifact: out.Artifact})
			}
		case driveCheckpoint:
			w.live = append(w.live, s.seal(t, sealReq{Subject: "zed", Kind: "episodic"}, "record of zed", ""))
			if r, err := s.call(http.MethodGet, "/v1/log/checkpoint", nil); err == nil {
				t.Fatalf("checkpoint answered %d %s, want the server dead at %s", r.Status, r.Body, step)
			}
		}
		s.killedAt(t, step)
	}
	checkDBIntegrity(t, dir)

	// Restart normally.
	s = startServer(t, dir, opts)
	w.checkInvariants(t, s)
	t.Logf("killed at %s; after the restart %d records open, %d answer 410, %d forgets committed or later, the log extends %d checkpoints",
		step, len(w.live), len(w.gone), len(w.forgets), len(w.checkpoints))
	if drive == driveForget {
		fs := s.listForgets(t, "")
		if len(fs) != 2 {
			t.Fatalf("after the restart: %d forgets, want 2: %+v", len(fs), fs)
		}
		again := s.forget(t, "alice")
		if aliceForget != "" && again.Forget != aliceForget {
			t.Fatalf("forget of alice after the restart gave %s, want %s", again.Forget, aliceForget)
		}
		if again.CommittedAt == nil {
			t.Fatalf("alice's forget after the restart: %+v", again)
		}
		w.forgets = append(w.forgets, again.Forget)
	}
	if drive == driveEpoch {
		// An interrupted epoch resumes on its own (or was done) and shreds
		// the forgets; resuming reuses a rotation that already happened.
		f := s.waitForget(t, aliceForget, "shredded by the resumed epoch", func(f forgetView) bool { return shreddedOrLater(f.State) })
		if f.Epoch != 1 {
			t.Errorf("forget shredded by epoch %d, want the resumed epoch 1", f.Epoch)
		}
		if v := s.rootVersion(t); v != 2 {
			t.Errorf("root version %d after the resumed epoch, want 2 (one rotation)", v)
		}
	}
	if drive == driveReinstate {
		// Committed before the death: mallory is live at her second
		// generation (a retry is refused, nothing starts a third), her old
		// records stay erased (w.gone), her forget stays erased.
		s.expectProblem(t, http.StatusConflict, "not_forgotten", http.MethodPost, "/v1/subjects/reinstate", map[string]string{"subject": "mallory"})
		w.live = append(w.live, s.seal(t, sealReq{Subject: "mallory", Kind: "episodic"}, "mallory, second life", "ctx-mallory-2"))
		if f := s.getForget(t, w.forgets[0]); f.State != "erased" {
			t.Fatalf("mallory's forget after the restart: %+v", f)
		}
	}
	if drive == driveForget || drive == driveEpoch {
		s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
			sealReq{Subject: "alice", Kind: "episodic", Plaintext: b64("back"), Unit: writeUnit})
	}

	// Convergence: every forget shredded within two epochs (at once
	// with per-subject keys: deleting the subject's Transit key shreds).
	for _, id := range w.forgets {
		f := s.waitForget(t, id, "re-keyed after the restart", func(f forgetView) bool { return f.RekeyedAt != nil })
		if perSub {
			f = s.waitForget(t, id, "shredded", func(f forgetView) bool { return shreddedOrLater(f.State) })
			if c := f.condition("subject_key_deleted"); c.Status != "ok" {
				t.Fatalf("forget %s: subject_key_deleted is %s (%s)", id, c.Status, c.Reason)
			}
			continue
		}
		for i := 0; i < 2 && !shreddedOrLater(f.State); i++ {
			s.runEpoch(t)
			f = s.getForget(t, id)
		}
		checkShreddedView(t, f)
	}
	w.live = append(w.live, s.seal(t, sealReq{Subject: "frank", Kind: "episodic"}, "record of frank", "ctx-frank"),
		s.seal(t, sealReq{Subject: "bob", Parents: []string{w.live[0].artifact}, Kind: "summary"}, "bob after recovery", ""))
	w.saveCheckpoint(t, s)
	w.checkInvariants(t, s)
	s.stop()

	// And once more from disk: the root and the database agree.
	checkDBIntegrity(t, dir)
	s = startServer(t, dir, opts)
	w.checkInvariants(t, s)
	s.stop()
}

// testCrashAtFirstStart kills a new installation's first start at step
// (the admin token's file or its stored hash): the restart must hand out a
// working admin token.
func testCrashAtFirstStart(t *testing.T, step string, opts serverOpts) {
	dir := t.TempDir()
	crash := opts
	crash.Env = append(slices.Clone(opts.Env), "SHREDD_TEST_CRASH_AT="+step)
	s := startProcess(t, dir, crash)
	s.killedAt(t, step)
	checkDBIntegrity(t, dir)
	s = startProcess(t, dir, opts)
	if !s.waitListening() {
		t.Fatalf("the restart after the kill exited: %v\n%s", s.waitErr, s.logs.String())
	}
	s.putKinds(t, "episodic")
	s.open(t, s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "record of alice", ""))
	s.stop()
}

// TestCrashSoak runs a mixed load against a server that kills itself at
// random durable steps (SHREDD_TEST_CRASH_RANDOM), restarts it after each
// death and checks the invariants each time. Bounded: at most 12 kills or
// 90s of load. SHREDD_TEST_SOAK_SEED replays a run.
func TestCrashSoak(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SHREDD_TEST_SOAK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	const p = "0.02"
	t.Logf("seed %d (SHREDD_TEST_SOAK_SEED=%d replays it), kill probability %s per step", seed, seed, p)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	opts := serverOpts{Buckets: 4}
	s := startServer(t, dir, opts)
	s.putKinds(t, "episodic", "summary")
	w := &crashWorld{}
	w.saveCheckpoint(t, s)
	s.stop()

	type subj struct {
		forgotten bool
	}
	var all []record
	deps := map[int][]string{} // record -> subjects it depends on
	subjects := map[string]*subj{}
	var names []string
	pending := map[string]bool{} // forgets sent without an answer
	isGone := func(i int) bool {
		for _, n := range deps[i] {
			if subjects[n].forgotten {
				return true
			}
		}
		return false
	}
	rebuild := func() {
		w.live, w.gone = nil, nil
		for i, r := range all {
			if isGone(i) {
				w.gone = append(w.gone, r)
			} else {
				w.live = append(w.live, r)
			}
		}
	}
	// resend sends again, on a server started normally, the forgets that
	// had no answer (a forget is idempotent) so that their subjects' fate
	// is known, and rebuilds the expectations.
	resend := func(s *server) {
		for n := range pending {
			f := s.forget(t, n)
			if !subjects[n].forgotten {
				w.forgets = append(w.forgets, f.Forget)
			}
			subjects[n].forgotten = true
			delete(pending, n)
		}
		rebuild()
	}
	kills := map[string]int{}
	nkills, ops := 0, 0
	deadline := time.Now().Add(90 * time.Second)
	for round := 0; nkills < 12 && time.Now().Before(deadline); round++ {
		crash := opts
		crash.Env = []string{fmt.Sprintf("SHREDD_TEST_CRASH_RANDOM=%s/%d", p, seed+uint64(round))}
		s = startProcess(t, dir, crash)
		alive := s.waitListening()
		for alive && time.Now().Before(deadline) {
			ops++
			var err error
			var r reply
			switch op := rng.IntN(100); {
			case op < 30 || len(names) < 3: // encrypt, new subject
				n := fmt.Sprintf("s%d", len(names))
				req := sealReq{Subject: n, Kind: "episodic", Plaintext: b64("of " + n), Context: b64("c"), Unit: writeUnit}
				if r, err = s.call(http.MethodPost, "/v1/encrypt", req); err == nil {
					var out sealed
					if r.Status != http.StatusOK {
						t.Fatalf("encrypt %s: %d %s", n, r.Status, r.Body)
					}
					r.into(t, &out)
					subjects[n] = &subj{}
					names = append(names, n)
					all = append(all, record{name: "of " + n, ciphertext: out.Ciphertext, context: "c", plaintext: "of " + n, artifact: out.Artifact})
					deps[len(all)-1] = []string{n}
				}
			case op < 50: // encrypt or derive, existing subject
				n := names[rng.IntN(len(names))]
				req := sealReq{Subject: n, Kind: "episodic", Plaintext: b64("more of " + n), Context: b64(""), Unit: writeUnit}
				d := []string{n}
				if op >= 40 && len(all) > 0 {
					pi := rng.IntN(len(all))
					req.Kind, req.Parents = "summary", []string{all[pi].artifact}
					d = append(d, deps[pi]...)
				}
				if r, err = s.call(http.MethodPost, "/v1/encrypt", req); err == nil {
					gone := slices.ContainsFunc(d, func(x string) bool { return subjects[x].forgotten })
					switch {
					case r.Status == http.StatusOK && !gone:
						var out sealed
						r.into(t, &out)
						all = append(all, record{name: "more of " + n, ciphertext: out.Ciphertext, plaintext: "more of " + n, artifact: out.Artifact})
						deps[len(all)-1] = d
					case r.Status == http.StatusGone && gone:
					case (r.Status == http.StatusGone || r.Status == http.StatusConflict) && slices.ContainsFunc(d, func(x string) bool { return pending[x] }):
					default:
						t.Fatalf("encrypt for %v (forgotten: %v): %d %s", d, gone, r.Status, r.Body)
					}
				}
			case op < 75: // decrypt
				if len(all) == 0 {
					continue
				}
				i := rng.IntN(len(all))
				if r, err = s.call(http.MethodPost, "/v1/decrypt", decryptReq(all[i])); err == nil {
					want := http.StatusOK
					if isGone(i) {
						want = http.StatusGone
					}
					if r.Status != want && !slices.ContainsFunc(deps[i], func(x string) bool { return pending[x] }) {
						t.Fatalf("decrypt of a record of %v: %d %s, want %d", deps[i], r.Status, r.Body, want)
					}
				}
			case op < 88: // forget
				n := names[rng.IntN(len(names))]
				pending[n] = true
				if r, err = s.call(http.MethodPost, "/v1/forget", map[string]string{"subject": n}); err == nil {
					if r.Status != http.StatusAccepted {
						t.Fatalf("forget %s: %d %s", n, r.Status, r.Body)
					}
					var f forgetView
					r.into(t, &f)
					delete(pending, n)
					if !subjects[n].forgotten {
						w.forgets = append(w.forgets, f.Forget)
					}
					subjects[n].forgotten = true
				}
			case op < 93: // epoch
				if r, err = s.call(http.MethodPost, "/v1/epoch", nil); err == nil && r.Status != http.StatusOK && r.Status != http.StatusConflict {
					t.Fatalf("epoch: %d %s", r.Status, r.Body)
				}
			case op < 96: // checkpoint
				if r, err = s.call(http.MethodGet, "/v1/log/checkpoint", nil); err == nil && r.Status == http.StatusOK {
					w.checkpoints = append(w.checkpoints, r.Body)
				}
			default: // token creation, in its own process
				cmd := exec.Command(shreddBinary(t), "token", "create", "--data-dir", dir, "--name", "soak", "--scopes", "decrypt")
				cmd.Env = append(envWithoutShredd(), crash.Env...)
				out, cerr := cmd.CombinedOutput()
				if cerr != nil {
					step, ok := killedStep(string(out))
					if !ok {
						t.Fatalf("shredd token create: %v\n%s", cerr, out)
					}
					kills["cli "+step]++
				}
			}
			if err != nil {
				alive = false
			}
		}
		if alive { // the time is up: a kill by the test, checked below like the others
			_ = s.cmd.Process.Kill()
			<-s.done
			break
		}
		s.waitKilled()
		step, ok := killedStep(s.logs.String())
		if !ok {
			t.Fatalf("the server died by SIGKILL without a crash point:\n%s", tail(s.logs.String(), 30))
		}
		kills[step]++
		nkills++
		checkDBIntegrity(t, dir)

		// Restart normally: forgets without an answer are sent again (a
		// forget is idempotent) so that their subjects' fate is known.
		s = startServer(t, dir, opts)
		resend(s)
		w.checkInvariants(t, s)
		s.stop()
	}
	t.Logf("%d operations, %d server kills, steps: %v", ops, nkills, kills)
	if nkills == 0 {
		t.Fatalf("the server never died in %d operations at p=%s", ops, p)
	}
	checkDBIntegrity(t, dir)
	s = startServer(t, dir, opts)
	resend(s)
	w.checkInvariants(t, s)
	s.stop()
}

// envWithoutShredd is the test's environment without SHREDD_* settings.
func envWithoutShredd() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHREDD_") {
			env = append(env, kv)
		}
	}
	return env
}

// killedStep returns the step of a "crashpoint: killed at" line in logs.
func killedStep(logs string) (string, bool) {
	_, rest, ok := strings.Cut(logs, "crashpoint: killed at ")
	if !ok {
		return "", false
	}
	step, _, _ := strings.Cut(rest, "\n")
	return step, true
}
