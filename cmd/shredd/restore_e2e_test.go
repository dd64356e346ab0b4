package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// waitBackups waits until dir holds n backups and returns them, oldest
// first.
func waitBackups(t *testing.T, dir string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		all, _ := listBackups(dir)
		if len(all) >= n {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backups in %s after %v, want %d", len(all), dir, hang, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// loseDatabase deletes the data directory's database with its WAL.
func loseDatabase(t *testing.T, dir string) {
	t.Helper()
	for _, s := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(filepath.Join(dir, node.DBFile+s)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// TestRestoreDrill is the drill of docs/operations.md on both root stores:
// write, epoch (which writes a backup), forget, lose the database, restore
// the backup: the forgotten subject answers 410 and stays forgotten,
// everyone else's data in the backup opens. Then a backup older than the
// last epoch is refused at start-up with a message that says so.
func TestRestoreDrill(t *testing.T) {
	for _, root := range []string{"local", "vault"} {
		t.Run(root, func(t *testing.T) {
			t.Parallel()
			dir, backups := t.TempDir(), filepath.Join(t.TempDir(), "backups")
			opts := serverOpts{Buckets: 4, Args: []string{"--backup-dir", backups, "--backup-keep", "5"}}
			var env []string
			if root == "vault" {
				srv := newVault(t)
				opts = vaultOpts(srv, "transit", "shredd-drill", opts.Args...)
				opts.Buckets = 4
				env = opts.Env
			}
			s := startServer(t, dir, opts)
			s.putKinds(t, "episodic", "summary")
			alice := s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice's record", "a")
			derived := s.seal(t, sealReq{Subject: "bob", Parents: []string{alice.artifact}, Kind: "summary"}, "alice and bob", "d")
			bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "b")
			carol := s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol's record", "c")
			s.runEpoch(t)
			backup := waitBackups(t, backups, 1)[0]

			// An online backup through the command, beside the automatic one.
			out := cli(t, "", env, nil, "backup", "--data-dir", dir, "--out", filepath.Join(t.TempDir(), "manual.db")).want(t, 0)
			if !strings.Contains(string(out.stdout), "root_version=") || !strings.Contains(string(out.stdout), "log_size=") {
				t.Fatalf("shredd backup printed %q, want the root version and log size", out.stdout)
			}
			list := cli(t, "", env, nil, "backup", "list", "--dir", backups).want(t, 0)
			if !strings.Contains(string(list.stdout), filepath.Base(backup)) {
				t.Fatalf("backup list: %s", list.stdout)
			}

			// Sealed after the backup: the registration WAL registers them
			// again at the first start after the restore.
			carolLate := s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol's second record, after the backup (her key is in the backup)", "e")
			late := s.seal(t, sealReq{Subject: "bob", Parents: []string{alice.artifact}, Kind: "summary"}, "alice's derivative, after the backup", "l")

			f := s.forget(t, "alice@example.com")
			s.shredded(t, alice)
			s.shredded(t, derived)
			s.shredded(t, late)
			s.stop()

			// Lose the database; restore the backup taken before the forget.
			loseDatabase(t, dir)
			cli(t, "", env, nil, "restore", "--data-dir", dir, backup).want(t, 0)
			s = startServer(t, dir, opts)
			if !strings.Contains(s.logs.String(), `"reapplied":1`) {
				t.Errorf("the start after the restore did not report the re-applied forget:\n%s", tail(s.logs.String(), 20))
			}
			if !strings.Contains(s.logs.String(), `"ledger_log_size"`) {
				t.Errorf("the start after the restore did not report the rewound transparency log:\n%s", tail(s.logs.String(), 20))
			}
			s.shredded(t, alice)
			s.shredded(t, derived)
			s.open(t, bob)
			s.open(t, carol)
			s.open(t, carolLate) // registered again from the WAL: not 409 unknown_artifact
			s.shredded(t, late)  // and in alice's lineage, which the re-applied forget covers
			if again := s.forget(t, "alice@example.com"); again.Forget != f.Forget {
				t.Fatalf("after the restore the forget of alice is %s, want %s", again.Forget, f.Forget)
			}
			s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
				sealReq{Subject: "alice@example.com", Kind: "episodic", Plaintext: b64("back"), Unit: writeUnit})
			s.stop()

			// Stays forgotten across a plain restart, and an epoch
			// completes (and takes a new backup).
			s = startServer(t, dir, opts)
			s.shredded(t, alice)
			s.runEpoch(t)
			s.waitForget(t, f.Forget, "shredded after the epoch", func(f forgetView) bool { return shreddedOrLater(f.State) })
			waitBackups(t, backups, 2)
			s.open(t, bob)
			s.stop()

			// The first backup now predates the last epoch: refused, saying
			// why, instead of answering 410 for everyone: by restore where
			// it can tell (the local root file), else at start-up.
			if root == "local" {
				cli(t, "", env, nil, "restore", "--data-dir", dir, backup).want(t, 1, "backup taken before the root's last epoch")
				// Put it in place by hand, as an operator without shredd restore would.
				loseDatabase(t, dir)
				b, err := os.ReadFile(backup)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, node.DBFile), b, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				cli(t, "", env, nil, "restore", "--data-dir", dir, backup).want(t, 0)
			}
			args := append([]string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--buckets", "4"}, opts.Args...)
			cli(t, "", opts.Env, nil, args...).want(t, 1, "backup taken before that epoch", "shredd backup list")

			// The newest backup (after the last epoch) restores.
			all := waitBackups(t, backups, 2)
			cli(t, "", env, nil, "restore", "--data-dir", dir, all[len(all)-1]).want(t, 0)
			s = startServer(t, dir, opts)
			s.shredded(t, alice)
			s.open(t, bob)
			s.open(t, carol)
			s.stop()
		})
	}
}
