package main

// Nothing acknowledged vanishes with Vault as the root store (issue 44,
// routes 7 to 11): the KV mount required, registrations after a backup
// kept by the mark in Vault, the root check run before serving when Vault
// was down at start, the wrong Vault refused without a key created next to
// the data, and refused starts that change nothing.

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/testkit/pgtest"
	"github.com/shredd/shredd/testkit/vaulttest"
)

func TestVaultNothingVanishes(t *testing.T) {
	t.Run("kv_mount_required", func(t *testing.T) { t.Parallel(); testVaultKVRequired(t) })
	t.Run("registrations_after_backup", func(t *testing.T) { t.Parallel(); testVaultRegistrationsKept(t) })
	t.Run("down_at_start_then_stale_database", func(t *testing.T) { t.Parallel(); testVaultDownThenStale(t) })
	t.Run("wrong_vault", func(t *testing.T) { t.Parallel(); testVaultWrongVault(t) })
	t.Run("transit_unmounted_while_serving", func(t *testing.T) { t.Parallel(); testVaultTransitGone(t) })
	t.Run("wrong_vault_postgres", func(t *testing.T) { t.Parallel(); testVaultWrongVaultPostgres(t) })
	t.Run("kv_emptied", func(t *testing.T) { t.Parallel(); testVaultKVEmptied(t) })
	t.Run("one_installation_per_key", func(t *testing.T) { t.Parallel(); testVaultOneInstallationPerKey(t) })
	t.Run("policy_without_marks", func(t *testing.T) { t.Parallel(); testVaultPolicyWithoutMarks(t) })
}

// testVaultKVEmptied: the KV mount emptied (disabled and enabled again, as
// the refusal of a missing mount advises) after the data directory was
// rolled back to before a forget: the mark's absence is a refused start
// (the database pins that a mark is kept), never a start that checks
// nothing and lets the forgotten record open; shredd wal accept-loss then
// keeps a new mark and records that an unknown number may be lost.
func testVaultKVEmptied(t *testing.T) {
	srv := newVault(t)
	opts := vaultOpts(srv, "transit", "shredd-kvwipe", "--cache-ttl", "1s")
	dir := t.TempDir()
	s := startServer(t, dir, opts)
	s.putKinds(t, "episodic")
	sue := s.seal(t, sealReq{Subject: "sue", Kind: "episodic"}, "sue's record", "s")
	s.stop()
	snap := copyDir(t, dir)
	s = startServer(t, dir, opts)
	s.forget(t, "sue")
	s.shredded(t, sue)
	s.stop()
	// The whole data directory rolled back, and the KV mount made anew.
	rolled := copyDir(t, snap)
	c := srv.Client("")
	if err := c.Sys().Unmount("secret"); err != nil {
		t.Fatal(err)
	}
	if err := c.Sys().Mount("secret", &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatal(err)
	}
	refusedServe(t, rolled, opts, "holds none", "put back the root store's contents")
	refusedServe(t, dir, opts, "holds none")
}

// testVaultOneInstallationPerKey: a second, new data directory on the
// Transit key of another is refused before it can run an epoch that
// destroys the versions the first one's data needs.
func testVaultOneInstallationPerKey(t *testing.T) {
	srv := newVault(t)
	opts := vaultOpts(srv, "transit", "shredd-shared-key")
	d1 := t.TempDir()
	s, alice := startAlice(t, d1, opts, "episodic")
	d2 := t.TempDir()
	refusedServe(t, d2, opts, "is used by another shredd installation", "--vault-key")
	s.open(t, alice)
	s.stop()
}

// testVaultPolicyWithoutMarks: a token whose policy lacks the marks path
// is refused at the start of a new data directory, naming the policy, and
// no Transit key is created.
func testVaultPolicyWithoutMarks(t *testing.T) {
	srv := newVault(t)
	const mount, key = "transit", "shredd-nomarks"
	c := srv.Client("")
	policy := strings.ReplaceAll(vault.Policy(mount, key), "path \"secret/data/shredd/"+key+"/marks/*\"", "path \"secret/data/shredd/"+key+"/elsewhere/*\"")
	if err := c.Sys().PutPolicy("nomarks", policy); err != nil {
		t.Fatal(err)
	}
	tok, err := c.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"nomarks"}, NoDefaultPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := serverOpts{Env: vaultEnv(tok.Auth.ClientToken), Args: []string{"--root", "vault", "--vault-addr", srv.Addr, "--vault-transit-mount", mount, "--vault-key", key}}
	refusedServe(t, t.TempDir(), opts, "may not", "marks", "policy of docs/operations.md")
	noTransitKey(t, srv, mount, key)
}

// testVaultWrongVaultPostgres is route 10 with many nodes' setup: a
// PostgreSQL database with data and a fresh Vault: a node with a new,
// empty data directory is refused, and no key is created in that Vault.
func testVaultWrongVaultPostgres(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	srv := newVault(t)
	const mount, key = "transit", "shredd-pg"
	opts := vaultOpts(srv, mount, key, "--store", dsn)
	first := t.TempDir()
	s := startServer(t, first, opts)
	s.putKinds(t, "episodic")
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "b")
	s.stop()
	fresh := newVault(t)
	refusedServe(t, t.TempDir(), vaultOpts(fresh, mount, key, "--store", dsn), "does not exist", "nothing was created")
	noTransitKey(t, fresh, mount, key)
	s = startServer(t, first, opts)
	s.open(t, bob)
	s.stop()
}

// refusedServe runs shredd serve on dir with opts, wants exit 1 with msgs
// on stderr and the data directory unchanged.
func refusedServe(t *testing.T, dir string, opts serverOpts, msgs ...string) {
	t.Helper()
	before := dirState(t, dir)
	args := append([]string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--buckets", "16"}, opts.Args...)
	cli(t, "", opts.Env, nil, args...).want(t, 1, msgs...)
	if after := dirState(t, dir); after != before {
		t.Fatalf("a refused start changed the data directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// testVaultKVRequired is route 7: without the KV v2 mount the forget
// records, the ledger head and the WAL's mark are not kept; the start is
// refused, naming the mount and the fix, instead of one warning later.
func testVaultKVRequired(t *testing.T) {
	srv := newVault(t)
	const mount, key = "transit", "shredd-kv"
	opts := vaultOpts(srv, mount, key)
	dir := t.TempDir()
	s, alice := startAlice(t, dir, opts, "episodic")
	s.stop()
	if err := srv.Client("").Sys().Unmount("secret"); err != nil {
		t.Fatal(err)
	}
	refusedServe(t, dir, opts, "KV version 2 mount secret/", "vault secrets enable -path=secret kv-v2", "--vault-kv-mount")
	// A fresh data directory too: the records are a requirement.
	refusedServe(t, t.TempDir(), opts, "KV version 2 mount secret/")
	if err := srv.Client("").Sys().Mount("secret", &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatal(err)
	}
	// Enabled again, empty: what was kept there is gone, which the start
	// says; accepting it keeps a new mark and records the unknown loss.
	refusedServe(t, dir, opts, "holds none")
	r := cli(t, "", opts.Env, nil, append([]string{"wal", "accept-loss", "--data-dir", dir}, opts.Args...)...).want(t, 0)
	if !strings.Contains(string(r.stdout), "how many is unknown") {
		t.Fatalf("shredd wal accept-loss of a lost mark: %s", r.stdout)
	}
	s = startServer(t, dir, opts)
	s.open(t, alice)
	s.stop()
}

// testVaultRegistrationsKept is route 8: a plaintext-held artifact
// registered after backup B1, then a newer backup, a restart (the WAL lets
// its segments go) and a restore of B1: the start is refused, naming the
// registrations, until the newest backup is back; never an erased
// attestation with "0 plaintext-held" while ann holds alice's plaintext.
func testVaultRegistrationsKept(t *testing.T) {
	srv := newVault(t)
	opts := vaultOpts(srv, "transit", "shredd-marks")
	dir := t.TempDir()
	s, _ := startAlice(t, dir, opts, "episodic", "embedding")
	b1 := filepath.Join(t.TempDir(), "b1.db")
	cli(t, "", opts.Env, nil, "backup", "--data-dir", dir, "--out", b1).want(t, 0)
	held := s.heldArtifact(t, "alice", "ann")
	b2 := filepath.Join(t.TempDir(), "b2.db")
	cli(t, "", opts.Env, nil, "backup", "--data-dir", dir, "--out", b2).want(t, 0)
	s.stop()
	s = startServer(t, dir, opts)
	s.stop()

	cli(t, "", opts.Env, nil, "restore", "--data-dir", dir, b1).want(t, 0)
	refusedServe(t, dir, opts, "were acknowledged", "neither in the database", "shredd wal accept-loss")
	cli(t, "", opts.Env, nil, append([]string{"wal", "check", "--data-dir", dir}, opts.Args...)...).want(t, 1, "were acknowledged")
	cli(t, "", opts.Env, nil, "restore", "--data-dir", dir, b2).want(t, 0)
	s = startServer(t, dir, opts)
	s.expect(t, http.StatusOK, http.MethodGet, "/v1/artifacts/"+held, nil)
	s.stop()
}

// testVaultDownThenStale is route 9: a database restored from before the
// last epoch, started while Vault is down, then Vault back: the start's
// root check runs before anything is served, and refuses; bob (never
// forgotten) is never answered 410.
func testVaultDownThenStale(t *testing.T) {
	srv := newVault(t)
	opts := vaultOpts(srv, "transit", "shredd-stale")
	dir := t.TempDir()
	s := startServer(t, dir, opts)
	s.putKinds(t, "episodic")
	s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "b")
	s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's record", "a")
	old := filepath.Join(t.TempDir(), "old.db")
	cli(t, "", opts.Env, nil, "backup", "--data-dir", dir, "--out", old).want(t, 0)
	f := s.forget(t, "alice")
	s.runEpoch(t)
	s.waitForget(t, f.Forget, "shredded", func(v forgetView) bool { return shreddedOrLater(v.State) })
	s.stop()
	cli(t, "", opts.Env, nil, "restore", "--data-dir", dir, old).want(t, 0)

	srv.Stop()
	p := startProcess(t, dir, opts)
	waitLogged(t, p, "the root store does not answer")
	if listeningAddr(p.logs.Bytes()) != "" {
		t.Fatalf("served a database it could not check:\n%s", p.logs)
	}
	srv.Start()
	select {
	case <-p.done:
	case <-time.After(hang):
		t.Fatalf("the start did not end once Vault was back:\n%s", p.logs)
	}
	if listeningAddr(p.logs.Bytes()) != "" || p.waitErr == nil || !strings.Contains(p.logs.String(), "destroyed in an epoch") {
		t.Fatalf("a database from before the last epoch, Vault back: want a refused start naming the epoch (%v):\n%s", p.waitErr, p.logs)
	}
}

// testVaultWrongVault is route 10: pointed at a fresh Vault, shredd never
// creates a root key next to existing data (refused, naming the fix), with
// Transit not mounted either; a key of the same name made by hand, whose
// versions agree, opens none of the bucket keys and is refused too.
func testVaultWrongVault(t *testing.T) {
	srv := newVault(t)
	const mount, key = "transit", "shredd-root"
	dir := t.TempDir()
	s := startServer(t, dir, vaultOpts(srv, mount, key))
	s.putKinds(t, "episodic")
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "b")
	s.stop()

	fresh := newVault(t)
	refusedServe(t, dir, vaultOpts(fresh, mount, key), "does not exist", "nothing was created", "--vault-addr")
	noTransitKey(t, fresh, mount, key)
	refusedServe(t, dir, vaultOpts(fresh, "no-such-mount", key), "does not exist", "nothing was created")
	// A key of the same name, made by hand: its version 1 is not ours.
	if _, err := fresh.Client("").Logical().Write(mount+"/keys/"+key, map[string]any{"type": "aes256-gcm96"}); err != nil {
		t.Fatal(err)
	}
	refusedServe(t, dir, vaultOpts(fresh, mount, key), "does not open the database's bucket keys", "--vault-addr")

	s = startServer(t, dir, vaultOpts(srv, mount, key))
	s.open(t, bob)
	s.stop()
}

// testVaultTransitGone: Transit disabled while shredd serves is a backend
// that does not answer (503), never the client's invalid envelope (422).
func testVaultTransitGone(t *testing.T) {
	srv := newVault(t)
	const mount, key = "kms-gone", "shredd-root"
	if err := srv.Client("").Sys().Mount(mount, &vaultapi.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, t.TempDir(), vaultOpts(srv, mount, key, "--cache-ttl", "1ns"))
	s.putKinds(t, "episodic")
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's record", "b")
	if err := srv.Client("").Sys().Unmount(mount); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	s.expectProblem(t, http.StatusServiceUnavailable, "backend_unavailable", http.MethodPost, "/v1/decrypt", decryptReq(bob))
	if r := s.do(t, http.MethodPost, "/v1/epoch", nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("an epoch with Transit gone: %d %s, want 503", r.Status, r.Body)
	}
	s.stop()
}

// noTransitKey fails the test when the Vault srv holds the Transit key
// mount/key: a refused start creates none.
func noTransitKey(t *testing.T, srv *vaulttest.Server, mount, key string) {
	t.Helper()
	if sec, err := srv.Client("").Logical().Read(mount + "/keys/" + key); err != nil || sec != nil {
		t.Fatalf("the refused start created %s/keys/%s: %v %v", mount, key, sec, err)
	}
}
