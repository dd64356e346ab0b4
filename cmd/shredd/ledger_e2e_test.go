package main

// End-to-end tests of the forget ledger with the real binary: a damaged
// tail is repaired from the database with a warning, or the start is
// refused naming shredd ledger check and repair; the head kept with the
// root catches a ledger cut at a line's end under an older database; a
// full ledger disk refuses forgets with 503 and commits nothing.

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/testkit/pgtest"
)

// ledgerLines returns the ledger file's lines, each with its newline.
func ledgerFileLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := bytes.SplitAfter(b, []byte("\n"))
	return ls[:len(ls)-1]
}

func writeLedger(t *testing.T, path string, lines ...[]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startRefused starts the server and expects it to exit before listening,
// with every one of want in its output.
func startRefused(t *testing.T, dir string, o serverOpts, want ...string) string {
	t.Helper()
	s := startProcess(t, dir, o)
	if s.waitListening() {
		t.Fatalf("the server started, want it refused:\n%s", tail(s.logs.String(), 30))
	}
	out := s.logs.String()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("the refused start does not say %q:\n%s", w, tail(out, 30))
		}
	}
	return out
}

// TestLedgerTornTailE2E: a torn last line whose forget the database holds
// is rewritten from the database at the next start, with a warning; the
// forgotten subjects stay 410. On SQLite and PostgreSQL.
func TestLedgerTornTailE2E(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			var o serverOpts
			if store == "postgres" {
				o.Args = []string{"--store", pgtest.Shared(t).NewDatabase(t)}
			}
			testLedgerTornTail(t, o)
		})
	}
}

// tornLedger is a stopped server's data directory whose forget ledger's
// last line, bob's, is torn: alice and bob forgotten, carol not.
type tornLedger struct {
	dir, path  string
	a, b, c    record // alice's, bob's and carol's records
	bobsForget forgetView
}

// tearLedger starts a server with o in a fresh data directory, seals a
// record of alice, bob and carol each, forgets alice then bob, stops, and
// keeps the first keep bytes of the ledger's last line.
func tearLedger(t *testing.T, o serverOpts, keep int) tornLedger {
	t.Helper()
	l := tornLedger{dir: t.TempDir()}
	s := startServer(t, l.dir, o)
	s.putKinds(t, "episodic")
	l.a = s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's record", "")
	l.b = s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "")
	l.c = s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol's record", "")
	s.forget(t, "alice")
	l.bobsForget = s.forget(t, "bob")
	s.stop()
	l.path = filepath.Join(l.dir, node.LedgerFile)
	ls := ledgerFileLines(t, l.path)
	writeLedger(t, l.path, append(ls[:len(ls)-1], ls[len(ls)-1][:keep])...)
	return l
}

func testLedgerTornTail(t *testing.T, o serverOpts) {
	l := tearLedger(t, o, 40)
	dir, path, a, b, c, fb := l.dir, l.path, l.a, l.b, l.c, l.bobsForget

	s := startServer(t, dir, o)
	if !strings.Contains(s.logs.String(), "the forget ledger was not whole and was repaired") {
		t.Fatalf("no warning of the repair:\n%s", tail(s.logs.String(), 20))
	}
	s.shredded(t, a)
	s.shredded(t, b)
	s.open(t, c)
	if f := s.getForget(t, fb.Forget); f.CommittedAt == nil {
		t.Fatalf("bob's forget after the repair: %+v", f)
	}
	s.stop()
	if got := ledgerFileLines(t, path); len(got) != 3 {
		t.Fatalf("the repaired ledger has %d lines, want a header and 2", len(got))
	}
	if m, _ := filepath.Glob(path + ".damaged-*"); len(m) != 1 {
		t.Fatalf("the damaged tail was not kept beside the ledger: %v", m)
	}
	// A clean start after the repair says nothing more.
	s = startServer(t, dir, o)
	if strings.Contains(s.logs.String(), "was not whole") {
		t.Fatal("the repaired ledger is reported damaged again")
	}
	s.shredded(t, b)
	s.stop()
}

// TestLedgerOlderBackupAfterDamageE2E: the ledger's last line is lost
// (cut at a line's end, or torn) and an older backup of the database is
// restored: the head kept with the root catches it, the start is refused
// naming the commands, shredd ledger check says what would be lost, a
// repair needs --accept-loss. Until then no forgotten subject decrypts.
func TestLedgerOlderBackupAfterDamageE2E(t *testing.T) {
	for _, damage := range []string{"cut", "torn"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			s := startServer(t, dir, serverOpts{})
			s.putKinds(t, "episodic")
			a := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's record", "")
			b := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "")
			backup := filepath.Join(t.TempDir(), "before.db")
			if code, out, errOut := runShredd(t, "backup", "--data-dir", dir, "--out", backup); code != 0 {
				t.Fatalf("backup: %d %s %s", code, out, errOut)
			}
			s.forget(t, "alice")
			s.forget(t, "bob")
			s.stop() // the head, with both lines, is kept with the root
			path := filepath.Join(dir, node.LedgerFile)
			ls := ledgerFileLines(t, path)
			last := ls[len(ls)-1]
			if damage == "cut" {
				writeLedger(t, path, ls[:len(ls)-1]...)
			} else {
				writeLedger(t, path, append(ls[:len(ls)-1], last[:len(last)-2])...)
			}
			damaged, _ := os.ReadFile(path)
			if code, out, errOut := runShredd(t, "restore", "--data-dir", dir, backup); code != 0 {
				t.Fatalf("restore: %d %s %s", code, out, errOut)
			}
			startRefused(t, dir, serverOpts{}, "shredd ledger check", "shredd ledger repair --accept-loss")
			if got, _ := os.ReadFile(path); !bytes.Equal(got, damaged) {
				t.Fatal("the refused start changed the ledger")
			}
			code, out, errOut := runShredd(t, "ledger", "check", "--data-dir", dir)
			if code != 1 || !strings.Contains(out, "would be lost") {
				t.Fatalf("ledger check: %d\n%s%s", code, out, errOut)
			}
			if damage == "cut" && !strings.Contains(out, "missing") {
				t.Fatalf("ledger check does not say a line is missing:\n%s", out)
			}
			if code, out, errOut := runShredd(t, "ledger", "repair", "--data-dir", dir); code != 1 || !strings.Contains(errOut, "--accept-loss") {
				t.Fatalf("ledger repair without --accept-loss: %d\n%s%s", code, out, errOut)
			}
			startRefused(t, dir, serverOpts{}, "shredd ledger check")
			if code, out, errOut := runShredd(t, "ledger", "repair", "--accept-loss", "--data-dir", dir); code != 0 {
				t.Fatalf("ledger repair --accept-loss: %d\n%s%s", code, out, errOut)
			}
			// The loss was accepted: alice's forget (whole in the ledger)
			// is committed again; bob's line is gone with the database's.
			s = startServer(t, dir, serverOpts{})
			s.shredded(t, a)
			s.open(t, b)
			if code, _, errOut := runShredd(t, "ledger", "check", "--data-dir", dir); code != 1 || !strings.Contains(errOut, "stop it first") {
				t.Fatalf("ledger check beside a running server: %d %s", code, errOut)
			}
			s.stop()
			if code, out, errOut := runShredd(t, "ledger", "check", "--data-dir", dir); code != 0 || !strings.Contains(out, "the ledger is whole") {
				t.Fatalf("ledger check after the repair: %d\n%s%s", code, out, errOut)
			}
		})
	}
}

// testCrashAtLedgerRepair kills the start that repairs a torn last line
// at step, then checks that the next start repairs it and every forget
// holds.
func testCrashAtLedgerRepair(t *testing.T, step string, opts serverOpts) {
	l := tearLedger(t, opts, 60)
	dir, path, a, b, c := l.dir, l.path, l.a, l.b, l.c
	crash := opts
	crash.Env = append(append([]string(nil), opts.Env...), "SHREDD_TEST_CRASH_AT="+step)
	s := startProcess(t, dir, crash)
	s.killedAt(t, step)
	checkDBIntegrity(t, dir)
	s = startServer(t, dir, opts)
	s.shredded(t, a)
	s.shredded(t, b)
	s.open(t, c)
	s.stop()
	if got := ledgerFileLines(t, path); len(got) != 3 {
		t.Fatalf("the ledger after the interrupted repair and a restart has %d lines, want a header and 2", len(got))
	}
}

// TestLedgerDiskFullE2E: the ledger on its own small volume (tmpfs), the
// volume full: a forget answers 503 with Retry-After and commits nothing
// (the subject's data still opens, no forget is listed); once there is
// room, the forget goes through. Needs root for the mount.
func TestLedgerDiskFullE2E(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test mounts a tmpfs: run it as root (scripts/test.sh does in CI)")
	}
	vol := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", vol).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", vol).Run() })
	dir := t.TempDir()
	ledger := filepath.Join(vol, "forgets.ledger")
	o := serverOpts{Args: []string{"--forget-ledger", ledger}}
	s := startServer(t, dir, o)
	s.putKinds(t, "episodic")
	recs := map[string]record{}
	for _, subj := range []string{"alice", "bob", "carol"} {
		recs[subj] = s.seal(t, sealReq{Subject: subj, Kind: "episodic"}, subj+"'s record", "")
	}
	s.forget(t, "alice")
	// Fill the volume.
	filler, err := os.OpenFile(filepath.Join(vol, "filler"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1024)
	for {
		if _, err := filler.Write(chunk); err != nil {
			if !errorsIsENOSPC(err) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	filler.Sync()
	// Forgets consume what was reserved before the disk filled; then
	// every forget is refused, and a refused forget commits nothing.
	committed := 1
	refused := 0
	for i := 0; i < 40 && refused == 0; i++ {
		subj := "subject-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		r := s.do(t, http.MethodPost, "/v1/forget", map[string]string{"subject": subj})
		switch r.Status {
		case http.StatusAccepted:
			committed++
		case http.StatusServiceUnavailable:
			refused++
			if p := r.problem(t); p.Code != "disk_full" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("a forget on a full ledger disk: %+v, Retry-After %q", p, r.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("forget on a full ledger disk: %d %s", r.Status, r.Body)
		}
	}
	if refused == 0 {
		t.Fatal("no forget was refused on a full ledger disk")
	}
	r := s.do(t, http.MethodPost, "/v1/forget", map[string]string{"subject": "bob"})
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("forget of bob on a full ledger disk: %d %s", r.Status, r.Body)
	}
	s.open(t, recs["bob"]) // nothing committed: bob's data still opens
	if n := len(s.listForgets(t, "")); n != committed {
		t.Fatalf("%d forgets listed, want the %d answered 202", n, committed)
	}
	// Room again: the forget goes through, and a restart finds the ledger whole.
	filler.Close()
	os.Remove(filepath.Join(vol, "filler"))
	s.forget(t, "bob")
	s.shredded(t, recs["bob"])
	s.open(t, recs["carol"])
	s.stop()
	s = startServer(t, dir, o)
	if strings.Contains(s.logs.String(), "was not whole") {
		t.Fatalf("the ledger is damaged after the full disk:\n%s", tail(s.logs.String(), 20))
	}
	s.shredded(t, recs["alice"])
	s.shredded(t, recs["bob"])
	s.stop()
}

func errorsIsENOSPC(err error) bool { return errors.Is(err, syscall.ENOSPC) }
