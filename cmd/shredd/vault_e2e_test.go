package main

// End-to-end tests of the real binary with --root vault against real Vault
// servers (internal/vaulttest: persistent file storage, so they can be
// stopped, started, sealed and unsealed). Each subtest has its own Vault and
// runs in parallel with the others.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/testkit/vaulttest"

	"github.com/shredd/shredd/cmd/shredd/node"
)

// newVault starts a persistent Vault for one test and shows its log when
// the test fails.
func newVault(t *testing.T) *vaulttest.Server {
	t.Helper()
	srv := vaulttest.Persistent(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("vault log:\n%s", tail(srv.Logs(), 40))
		}
	})
	return srv
}

// vaultEnv is the environment of a shredd process using Vault: the token in
// VAULT_TOKEN (none when empty), and no other VAULT_* setting from the
// caller's environment.
func vaultEnv(token string) []string {
	return []string{"VAULT_TOKEN=" + token, "VAULT_ADDR=", "VAULT_NAMESPACE=", "VAULT_CACERT="}
}

// vaultOpts returns the server options of shredd on the Vault key mount/key
// with the root token in VAULT_TOKEN, plus extra flags.
func vaultOpts(srv *vaulttest.Server, mount, key string, extra ...string) serverOpts {
	args := []string{"--root", "vault", "--vault-addr", srv.Addr, "--vault-transit-mount", mount, "--vault-key", key}
	return serverOpts{Env: vaultEnv(srv.RootToken), Args: append(args, extra...)}
}

// transitKey is what Vault reports of a Transit key.
type transitKey struct {
	Latest, MinAvailable, MinDecryption, MinEncryption int
	Versions                                           []int // the versions still in the key ring
	Exportable                                         bool
}

// readTransitKey reads a Transit key with the root token.
func readTransitKey(t *testing.T, srv *vaulttest.Server, mount, key string) transitKey {
	t.Helper()
	sec, err := srv.Client("").Logical().Read(mount + "/keys/" + key)
	if err != nil || sec == nil {
		t.Fatalf("read transit key %s/%s: %v (%v)", mount, key, err, sec)
	}
	return transitKeyOf(t, sec.Data)
}

// transitKeyOf reads a Transit key from the data of Vault's answer to a
// read of transit/keys/NAME.
func transitKeyOf(t *testing.T, d map[string]any) transitKey {
	t.Helper()
	k := transitKey{Latest: vaulttest.Num(d["latest_version"]), MinAvailable: vaulttest.Num(d["min_available_version"]),
		MinDecryption: vaulttest.Num(d["min_decryption_version"]), MinEncryption: vaulttest.Num(d["min_encryption_version"])}
	k.Exportable, _ = d["exportable"].(bool)
	ring, _ := d["keys"].(map[string]any)
	for v := range ring {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("transit key ring entry %q", v)
		}
		k.Versions = append(k.Versions, n)
	}
	sort.Ints(k.Versions)
	return k
}

// checkTrimmed checks that only the latest version of the key exists and
// that it is the only one Vault will decrypt with.
func checkTrimmed(t *testing.T, srv *vaulttest.Server, mount, key string, latest int) {
	t.Helper()
	k := readTransitKey(t, srv, mount, key)
	if k.Latest != latest || k.MinAvailable != latest || k.MinDecryption != latest || k.MinEncryption != latest ||
		!slices.Equal(k.Versions, []int{latest}) {
		t.Fatalf("transit key %s/%s after the epoch: %+v, want latest = min_available = min_decryption = min_encryption = %d and only that version in keys",
			mount, key, k, latest)
	}
	if k.Exportable {
		t.Fatalf("transit key %s/%s is exportable", mount, key)
	}
}

// endStory is how the Vault tests' stories end: an epoch after alice's
// forget, the forget read back shredded, the Transit key trimmed to version
// 2, alice's record shredded and bob's open; then the server stops.
func (s *server) endStory(t *testing.T, srv *vaulttest.Server, mount, key, forget string, alice, bob record) {
	t.Helper()
	s.runEpoch(t)
	checkShreddedView(t, s.getForget(t, forget))
	checkTrimmed(t, srv, mount, key, 2)
	s.shredded(t, alice)
	s.open(t, bob)
	s.stop()
}

// health returns the status of GET /healthz and, on 200, its body.
func (s *server) health(t *testing.T) (int, map[string]any) {
	t.Helper()
	r, err := s.callToken(http.MethodGet, "/healthz", "-", nil)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	var body map[string]any
	if r.Status == http.StatusOK {
		r.into(t, &body)
	} else if p := r.problem(t); p.Code != "backend_unavailable" {
		t.Fatalf("GET /healthz: %d with code %q, want backend_unavailable", r.Status, p.Code)
	}
	return r.Status, body
}

// failsClosed checks that a request answers 503 backend_unavailable and
// that its body holds no plaintext of recs.
func (s *server) failsClosed(t *testing.T, what, path string, body any, recs ...record) {
	t.Helper()
	r := s.do(t, http.MethodPost, path, body)
	for _, rec := range recs {
		if strings.Contains(string(r.Body), b64(rec.plaintext)) || strings.Contains(string(r.Body), rec.plaintext) {
			t.Fatalf("%s without a root store: the answer holds the plaintext of %s: %d %s", what, rec.name, r.Status, r.Body)
		}
	}
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("%s without a root store: %d, want 503: %s", what, r.Status, r.Body)
	}
	if p := r.problem(t); p.Code != "backend_unavailable" {
		t.Fatalf("%s without a root store: code %q, want backend_unavailable", what, p.Code)
	}
}

// waitState polls a forget until it reaches state (at most hang).
func (s *server) waitState(t *testing.T, id, state string) forgetView {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		f := s.getForget(t, id)
		if f.State == state || (state == "shredded" && shreddedOrLater(f.State)) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("forget %s: not %s within %v: %+v", id, state, hang, f)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// copyDir copies a stopped server's data directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	// A backup keeps the files' modes (os.CopyFS does not): shredd refuses
	// secrets readable by others.
	err := filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil || !(e.Type().IsRegular() || e.IsDir()) {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		return os.Chmod(filepath.Join(dst, rel), info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// runToExit runs the binary and waits for it to exit (at most 30 s),
// returning its exit code and output. The server must not start serving.
func runToExit(t *testing.T, args, env []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shreddBinary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHREDD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	logs := &logBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("shredd %v still running after 30s, want it to refuse to start:\n%s", args, logs)
	}
	if listeningAddr(logs.Bytes()) != "" {
		t.Fatalf("shredd %v started serving, want a refusal:\n%s", args, logs)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), logs.String()
	}
	if err != nil {
		t.Fatalf("run shredd: %v", err)
	}
	return 0, logs.String()
}

func TestVault(t *testing.T) {
	t.Run("walkthrough", func(t *testing.T) { t.Parallel(); testVaultWalkthrough(t) })
	t.Run("fail_closed_background_recovery", func(t *testing.T) { t.Parallel(); testVaultFailClosed(t, false) })
	t.Run("fail_closed_manual_epoch", func(t *testing.T) { t.Parallel(); testVaultFailClosed(t, true) })
	t.Run("sealed", func(t *testing.T) { t.Parallel(); testVaultSealed(t) })
	t.Run("down_at_startup", func(t *testing.T) { t.Parallel(); testVaultDownAtStartup(t) })
	t.Run("unsafe_key", func(t *testing.T) { t.Parallel(); testVaultUnsafeKey(t) })
	t.Run("key_made_exportable_while_running", func(t *testing.T) { t.Parallel(); testVaultKeyMadeExportable(t) })
	t.Run("backup", func(t *testing.T) { t.Parallel(); testVaultBackup(t) })
	t.Run("approle", func(t *testing.T) { t.Parallel(); testVaultAppRole(t) })
}

// testVaultWalkthrough: the README story with Vault as the root store; after
// the epoch, Vault's key holds only the new version. A restart reads the
// token from --vault-token-file, a token with only vault.Policy, and runs a
// second forget and epoch with it.
func testVaultWalkthrough(t *testing.T) {
	srv := newVault(t)
	dir := t.TempDir()
	const mount, key = "transit", "shredd-root"
	// The default mount and key: only the address and the token are set.
	s := startServer(t, dir, serverOpts{Env: vaultEnv(srv.RootToken), Args: []string{"--root", "vault", "--vault-addr", srv.Addr}})
	if st, h := s.health(t); st != http.StatusOK || h["root_store"] != "vault-transit" || vaulttest.Num(h["root_version"]) != 1 {
		t.Fatalf("healthz: %d %v", st, h)
	}
	// shredd created the key, safe: not exportable, one version.
	if k := readTransitKey(t, srv, mount, key); k.Exportable || k.Latest != 1 || !slices.Equal(k.Versions, []int{1}) {
		t.Fatalf("transit key created by shredd: %+v", k)
	}

	alice, bob, carol, derivative, aggregate := sealFamily(t, s)
	bobCarol := s.seal(t, sealReq{Subjects: []string{"bob"}, Parents: []string{carol.artifact}, Kind: "summary"}, "bob and carol", "bc")
	for _, rec := range []record{alice, bob, carol, derivative, aggregate, bobCarol} {
		s.open(t, rec)
	}
	s.expectProblem(t, http.StatusUnprocessableEntity, "invalid_envelope", http.MethodPost, "/v1/decrypt",
		map[string]string{"ciphertext": tamper(alice.ciphertext), "context": b64(alice.context)})

	f := s.forget(t, "alice")
	if f.State != "committed" || f.condition("key_destroyed").Status != "ok" || f.condition("epoch_rotated").Status != "pending" {
		t.Fatalf("forget: %+v", f)
	}
	for _, rec := range []record{alice, derivative, aggregate} {
		s.shredded(t, rec)
	}
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: "alice", Kind: "episodic", Plaintext: b64("I am back"), Unit: writeUnit})
	for _, rec := range []record{bob, carol, bobCarol} {
		s.open(t, rec)
	}
	s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	// Before the epoch, version 1 still exists in Vault: a backup of the
	// database could still open alice's old bucket key.
	if k := readTransitKey(t, srv, mount, key); k.Latest != 1 || k.MinDecryption != 1 || !slices.Equal(k.Versions, []int{1}) {
		t.Fatalf("transit key before the epoch: %+v", k)
	}

	e := s.runEpoch(t)
	if e.RootVersion != 2 || !slices.Equal(e.Retired, []int{1}) {
		t.Fatalf("epoch: %+v, want root version 2, retired [1]", e)
	}
	checkShreddedView(t, s.getForget(t, f.Forget))
	checkTrimmed(t, srv, mount, key, 2)
	if st, h := s.health(t); st != http.StatusOK || vaulttest.Num(h["root_version"]) != 2 {
		t.Fatalf("healthz after the epoch: %d %v", st, h)
	}
	for _, rec := range []record{alice, derivative, aggregate} {
		s.shredded(t, rec)
	}
	for _, rec := range []record{bob, carol, bobCarol} {
		s.open(t, rec)
	}
	s.stop()

	// Restart with the token in --vault-token-file: a renewable token
	// holding only the least-privilege policy. The file wins over a
	// VAULT_TOKEN that would not work.
	c := srv.Client("")
	if err := c.Sys().PutPolicy("shredd", vault.Policy(mount, key)); err != nil {
		t.Fatal(err)
	}
	tok, err := c.Auth().Token().Create(&vaultapi.TokenCreateRequest{Policies: []string{"shredd"}, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "vault-token")
	if err := os.WriteFile(tokenFile, []byte(tok.Auth.ClientToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, dir, serverOpts{Env: vaultEnv("hvs.not-a-valid-token"), Args: []string{"--root", "vault", "--vault-addr", srv.Addr, "--vault-token-file", tokenFile}})
	if st, _ := s.health(t); st != http.StatusOK {
		t.Fatalf("healthz with the token file: %d", st)
	}
	for _, rec := range []record{bob, carol, bobCarol} {
		s.open(t, rec)
	}
	for _, rec := range []record{alice, derivative, aggregate} {
		s.shredded(t, rec)
	}
	dave := s.seal(t, sealReq{Subject: "dave", Kind: "episodic"}, "dave's record", "d")
	f2 := s.forget(t, "carol")
	s.shredded(t, carol)
	s.shredded(t, bobCarol)
	s.waitForget(t, f2.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	if e := s.runEpoch(t); e.RootVersion != 3 || !slices.Equal(e.Retired, []int{2}) {
		t.Fatalf("second epoch with the policy token: %+v, want root version 3, retired [2]", e)
	}
	checkShreddedView(t, s.getForget(t, f2.Forget))
	checkTrimmed(t, srv, mount, key, 3)
	s.open(t, bob)
	s.open(t, dave)
	s.shredded(t, carol)
	s.stop()
}

// testVaultFailClosed stops Vault under a running shredd that caches
// nothing: encrypt, decrypt and health fail closed, a forget still commits
// and its barrier holds, no epoch completes. Once Vault is back, the forget
// is shredded by the background work (manual=false) or by POST /v1/epoch
// (manual=true).
func testVaultFailClosed(t *testing.T, manual bool) {
	srv := newVault(t)
	const mount, key = "transit", "shredd-failclosed"
	interval := "1s" // the background work runs the epoch
	if manual {
		interval = "1h" // only POST /v1/epoch does
	}
	s := startServer(t, t.TempDir(), vaultOpts(srv, mount, key, "--cache-ttl", "1ns", "--epoch-interval", interval))
	s.putKinds(t, "episodic", "summary")
	alice := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's secret record", "a")
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's secret record", "b")
	carol := s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol's secret record", "c")
	bobCarol := s.seal(t, sealReq{Subjects: []string{"bob", "carol"}, Kind: "summary"}, "bob and carol's summary", "bc")
	derivative := s.seal(t, sealReq{Parents: []string{alice.artifact}, Kind: "summary"}, "summary of alice", "s")
	// Aggregates of alice with one other live subject each: the subjects of
	// a lineage are ordered by their keyed hash, so in some of them the live
	// subject comes first.
	var aliceAggs []record
	for i := range 8 {
		aliceAggs = append(aliceAggs, s.seal(t, sealReq{Subjects: []string{"alice", fmt.Sprint("partner-", i)}, Kind: "summary"},
			fmt.Sprint("alice with partner ", i), "agg"))
	}
	live := []record{bob, carol, bobCarol}
	for _, rec := range append(append(slices.Clone(live), alice, derivative), aliceAggs...) {
		s.open(t, rec)
	}
	// frank is never decrypted (no lease), so his forget can reach erased.
	frank := s.seal(t, sealReq{Subject: "frank", Kind: "episodic"}, "frank's record", "f")

	srv.Stop()
	everything := append(append(slices.Clone(live), alice, derivative), aliceAggs...)
	s.failsClosed(t, "encrypt for a known subject", "/v1/encrypt", sealReq{Subject: "bob", Kind: "episodic", Plaintext: b64("more"), Context: b64("x"), Unit: writeUnit})
	s.failsClosed(t, "encrypt for a new subject", "/v1/encrypt", sealReq{Subject: "erin", Kind: "episodic", Plaintext: b64("new"), Unit: writeUnit})
	s.failsClosed(t, "encrypt of an aggregate", "/v1/encrypt", sealReq{Subjects: []string{"bob", "carol"}, Kind: "summary", Plaintext: b64("agg"), Unit: writeUnit})
	for _, rec := range everything {
		s.failsClosed(t, "decrypt of "+rec.name, "/v1/decrypt", decryptReq(rec), everything...)
	}
	if st, _ := s.health(t); st != http.StatusServiceUnavailable {
		t.Fatalf("healthz with Vault stopped: %d, want 503", st)
	}

	// A forget commits without Vault, and its barrier holds at once. The
	// key is unreachable, so frank's commitment salt cannot come from it: a
	// random one, and the log links his key_created entry by index.
	fFrank := s.forget(t, "frank")
	s.shredded(t, frank)
	f := s.forget(t, "alice")
	if f.State != "committed" || f.CommittedAt == nil || f.condition("key_destroyed").Status != "ok" ||
		f.condition("bucket_rekeyed").Status != "pending" || f.condition("epoch_rotated").Status != "pending" {
		t.Fatalf("forget with Vault stopped: %+v", f)
	}
	s.shredded(t, alice)
	s.shredded(t, derivative)
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Subject: "alice", Kind: "episodic", Plaintext: b64("back"), Unit: writeUnit})
	s.expectProblem(t, http.StatusGone, "shredded", http.MethodPost, "/v1/encrypt",
		sealReq{Parents: []string{alice.artifact}, Kind: "summary", Plaintext: b64("derived"), Unit: writeUnit})
	// Aggregates of alice: never a plaintext; the barrier says 410 whatever
	// the order of the lineage (checked after the recovery below, so that a
	// known bug here does not hide the rest).
	var agg503 []string
	for _, rec := range aliceAggs {
		r := s.do(t, http.MethodPost, "/v1/decrypt", decryptReq(rec))
		switch {
		case r.Status == http.StatusGone:
		case r.Status == http.StatusServiceUnavailable:
			agg503 = append(agg503, rec.name)
		default:
			t.Fatalf("decrypt of %s (forgotten alice, Vault stopped): %d %s, want 410", rec.name, r.Status, r.Body)
		}
	}
	for _, rec := range live {
		s.failsClosed(t, "decrypt of "+rec.name+" after the forget", "/v1/decrypt", decryptReq(rec), everything...)
	}

	// No epoch can complete: the forget stays committed, also while the
	// background work retries.
	s.expectProblem(t, http.StatusServiceUnavailable, "backend_unavailable", http.MethodPost, "/v1/epoch", nil)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if g := s.getForget(t, f.Forget); g.State != "committed" || g.RekeyedAt != nil || g.ShreddedAt != nil || g.Epoch != 0 {
			t.Fatalf("forget with Vault stopped: %+v, want committed, not re-keyed", g)
		}
	}
	// The retry comes on the background work's own schedule: wait for it
	// (a machine under load may take longer than the 3 s above).
	waitLogged(t, s, "background work failed; retrying")
	if fs := s.listForgets(t, "shredded"); len(fs) != 0 {
		t.Fatalf("shredded forgets with Vault stopped: %+v", fs)
	}

	srv.Start()
	if manual {
		// POST /v1/epoch re-keys and runs the epoch itself, at once.
		e := s.runEpoch(t)
		if e.RootVersion != 2 || !slices.Equal(e.Retired, []int{1}) {
			t.Fatalf("epoch after Vault came back: %+v", e)
		}
	}
	// The background loop's backoff may have grown while Vault was down (1 s
	// doubling, at most 60 s).
	g := s.waitState(t, f.Forget, "shredded")
	checkShreddedView(t, g)
	checkTrimmed(t, srv, mount, key, 2)
	if st, h := s.health(t); st != http.StatusOK || vaulttest.Num(h["root_version"]) != 2 {
		t.Fatalf("healthz after Vault came back: %d %v", st, h)
	}
	for _, rec := range live {
		s.open(t, rec)
	}
	for _, rec := range append([]record{alice, derivative}, aliceAggs...) {
		s.shredded(t, rec)
	}
	s.open(t, s.seal(t, sealReq{Subject: "erin", Kind: "episodic"}, "erin after the recovery", "e"))

	// frank's forget, committed with Vault down, is erased and exported: the
	// export verifies, its key_created entry linked by index only.
	s.waitState(t, fFrank.Forget, "shredded")
	s.waitErased(t, fFrank.Forget, time.Time{})
	export := filepath.Join(t.TempDir(), "frank.tar.gz")
	s.cli(t, "export", "--out", export, fFrank.Forget)
	out := verifyArgs{export: export, key: filepath.Join(s.dataDir, node.AttestationPubFile), logKey: filepath.Join(s.dataDir, node.LogVKeyFile),
		subject: "frank", salt: fFrank.CommitmentSalt}
	if code, text := out.run(t); code != 0 || !strings.Contains(text, "named by index by the forget (its commitment uses another salt") ||
		!strings.Contains(text, "the subject id and salt open commitment") {
		t.Errorf("shredd verify of frank's export (forgotten with Vault down): exit %d\n%s", code, text)
	}
	s.stop()

	t.Run("aggregates_of_the_forgotten_subject_answered_410", func(t *testing.T) {
		if len(agg503) > 0 {
			t.Fatalf("with Vault stopped, decrypt of %d of %d aggregates of the forgotten alice answered 503 instead of 410 (%v): "+
				"the local tombstone must win over the unavailable backend", len(agg503), len(aliceAggs), agg503)
		}
	})
}

// testVaultSealed: a sealed Vault fails closed like a stopped one; after
// the unseal everything works again. It also uses a Transit mount other
// than the default.
func testVaultSealed(t *testing.T) {
	srv := newVault(t)
	const mount, key = "shredd-kms", "root-of-tree"
	if err := srv.Client("").Sys().Mount(mount, &vaultapi.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, t.TempDir(), vaultOpts(srv, mount, key, "--cache-ttl", "1ns"))
	s.putKinds(t, "episodic")
	alice := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice's sealed record", "a")
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob's sealed record", "b")
	if k := readTransitKey(t, srv, mount, key); k.Latest != 1 {
		t.Fatalf("key on mount %s: %+v", mount, k)
	}

	srv.Seal()
	s.failsClosed(t, "encrypt", "/v1/encrypt", sealReq{Subject: "bob", Kind: "episodic", Plaintext: b64("more"), Unit: writeUnit})
	s.failsClosed(t, "decrypt", "/v1/decrypt", decryptReq(bob), bob, alice)
	if st, _ := s.health(t); st != http.StatusServiceUnavailable {
		t.Fatalf("healthz with Vault sealed: %d, want 503", st)
	}
	s.expectProblem(t, http.StatusServiceUnavailable, "backend_unavailable", http.MethodPost, "/v1/epoch", nil)
	f := s.forget(t, "alice")
	if f.State != "committed" {
		t.Fatalf("forget with Vault sealed: %+v", f)
	}
	s.shredded(t, alice)

	srv.Unseal()
	s.open(t, bob)
	s.open(t, s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob after the unseal", "b2"))
	if st, _ := s.health(t); st != http.StatusOK {
		t.Fatalf("healthz after the unseal: %d", st)
	}
	s.endStory(t, srv, mount, key, f.Forget, alice, bob)
}

// testVaultDownAtStartup: a data directory initialised with Vault up is not
// served while Vault is down at its start (the start-up checks need it): the
// start waits, says so, and serves once Vault is back; Vault down while it
// serves fails closed, and forgets still commit. A fresh data directory cannot be initialised without
// Vault: that start fails and leaves nothing half-made.
func testVaultDownAtStartup(t *testing.T) {
	srv := newVault(t)
	const mount, key = "transit", "shredd-startup"
	dir := t.TempDir()
	opts := vaultOpts(srv, mount, key, "--cache-ttl", "1ns")
	s := startServer(t, dir, opts)
	s.putKinds(t, "episodic")
	alice := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice before the outage", "a")
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob before the outage", "b")
	s.stop()

	srv.Stop()
	// A fresh data directory has its own key: one installation per key.
	fresh, freshOpts := t.TempDir(), vaultOpts(srv, mount, key+"-fresh", "--cache-ttl", "1ns")
	code, out := runToExit(t, append([]string{"serve", "--data-dir", fresh, "--addr", "127.0.0.1:0", "--buckets", "16"}, freshOpts.Args...), freshOpts.Env)
	if code == 0 || !strings.Contains(out, "unavailable") {
		t.Fatalf("first start of a fresh data dir with Vault down: exit %d, want a failure naming the unavailable root store:\n%s", code, out)
	}

	// A data directory with data is not served before the start's checks,
	// which need Vault, have run: the start waits for it, and says so.
	s = startProcess(t, dir, opts)
	waitLogged(t, s, "the root store does not answer")
	if listeningAddr(s.logs.Bytes()) != "" {
		t.Fatalf("served with Vault down before the start-up checks ran:\n%s", s.logs)
	}
	srv.Start()
	if !s.waitListening() {
		t.Fatalf("shredd exited once Vault was back (%v):\n%s", s.waitErr, s.logs)
	}
	s.open(t, bob)
	// Down while serving: fail closed, forgets still commit.
	srv.Stop()
	if st, _ := s.health(t); st != http.StatusServiceUnavailable {
		t.Fatalf("healthz with Vault down: %d, want 503", st)
	}
	s.failsClosed(t, "encrypt", "/v1/encrypt", sealReq{Subject: "bob", Kind: "episodic", Plaintext: b64("x"), Unit: writeUnit})
	s.failsClosed(t, "decrypt", "/v1/decrypt", decryptReq(bob), alice, bob)
	f := s.forget(t, "alice")
	if f.State != "committed" || f.condition("key_destroyed").Status != "ok" {
		t.Fatalf("forget with Vault down: %+v", f)
	}
	s.shredded(t, alice)

	srv.Start()
	s.open(t, bob)
	if st, _ := s.health(t); st != http.StatusOK {
		t.Fatalf("healthz after Vault started: %d", st)
	}
	carol := s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol after the outage", "c")
	s.open(t, carol)
	s.endStory(t, srv, mount, key, f.Forget, alice, bob)

	// The fresh data dir whose first start failed starts now.
	s = startServer(t, fresh, freshOpts)
	s.putKinds(t, "episodic")
	s.open(t, s.seal(t, sealReq{Subject: "dave", Kind: "episodic"}, "dave in the fresh dir", "d"))
	s.stop()
}

// testVaultUnsafeKey: shredd refuses to start on an exportable Transit key
// (or one that allows plaintext backups).
func testVaultUnsafeKey(t *testing.T) {
	srv := newVault(t)
	c := srv.Client("")
	for _, tc := range []struct {
		key  string
		opts map[string]any
		want string
	}{
		{"shredd-exportable", map[string]any{"type": "aes256-gcm96", "exportable": true}, "exportable=true"},
		{"shredd-plaintext-backup", map[string]any{"type": "aes256-gcm96", "exportable": true, "allow_plaintext_backup": true}, "allow_plaintext_backup=true"},
	} {
		if _, err := c.Logical().Write("transit/keys/"+tc.key, tc.opts); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		o := vaultOpts(srv, "transit", tc.key)
		code, out := runToExit(t, append([]string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--buckets", "16"}, o.Args...), o.Env)
		if code == 0 || !strings.Contains(out, tc.want) || !strings.Contains(out, "defeats shredding") {
			t.Fatalf("start on key %s: exit %d, want a refusal naming %s:\n%s", tc.key, code, tc.want, out)
		}
		// Nothing was wrapped under the unsafe key.
		if k := readTransitKey(t, srv, "transit", tc.key); k.Latest != 1 {
			t.Fatalf("unsafe key %s after the refusal: %+v", tc.key, k)
		}
		if _, err := os.Stat(filepath.Join(dir, node.DBFile)); err == nil {
			t.Errorf("refused start on key %s created a database", tc.key)
		}
	}
}

// testVaultKeyMadeExportable: an operator makes the Transit key exportable
// while shredd runs. From then on a copy of the root may exist outside
// Vault, so an epoch's trim proves nothing and no forget may be reported
// shredded.
func testVaultKeyMadeExportable(t *testing.T) {
	srv := newVault(t)
	const mount, key = "transit", "shredd-later-exportable"
	s, alice := startAlice(t, t.TempDir(), vaultOpts(srv, mount, key), "episodic")
	f := s.forget(t, "alice")
	s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	if _, err := srv.Client("").Logical().Write(mount+"/keys/"+key+"/config", map[string]any{"exportable": true}); err != nil {
		t.Fatal(err)
	}
	s.shredded(t, alice)
	r := s.do(t, http.MethodPost, "/v1/epoch", nil)
	g := s.getForget(t, f.Forget)
	if r.Status == http.StatusOK || shreddedOrLater(g.State) {
		t.Fatalf("the Transit key was made exportable after start-up, yet POST /v1/epoch answered %d and the forget is %q "+
			"(conditions %+v): an unsafe key must stop every epoch",
			r.Status, g.State, g.Conditions)
	}
}

// sealFamily adds the kinds episodic and summary to s and seals the
// records of the Vault tests: alice's, bob's and carol's own (episodic),
// bob's summary of alice's (derivative) and a summary of all three
// (aggregate).
func sealFamily(t *testing.T, s *server) (alice, bob, carol, derivative, aggregate record) {
	t.Helper()
	s.putKinds(t, "episodic", "summary")
	alice = s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice: I live at 12 Rue de la Paix", "conversation-1")
	bob = s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob: my card ends in 4242", "conversation-2")
	carol = s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol: allergic to penicillin", "")
	derivative = s.seal(t, sealReq{Subject: "bob", Parents: []string{alice.artifact}, Kind: "summary"}, "bob and alice talked about Paris", "summary-1")
	aggregate = s.seal(t, sealReq{Subjects: []string{"alice", "bob", "carol"}, Kind: "summary"}, "three users like Paris", "aggregate")
	return alice, bob, carol, derivative, aggregate
}

// testVaultBackup: a copy of the data directory taken before alice's
// forget still opens her data until the next epoch, and never after it:
// keys under destroyed root versions answer 410. The copy holds alice's
// wrapped key; only the destroyed root version protects it.
func testVaultBackup(t *testing.T) {
	srv := newVault(t)
	const mount, key = "transit", "shredd-backup"
	opts := vaultOpts(srv, mount, key)
	dir := t.TempDir()
	s := startServer(t, dir, opts)
	alice, bob, carol, derivative, aggregate := sealFamily(t, s)
	aliceRecs := []record{alice, derivative, aggregate}
	live := []record{bob, carol}
	s.stop() // a consistent copy: the database is closed
	backup := copyDir(t, dir)

	s = startServer(t, dir, opts)
	f := s.forget(t, "alice")
	s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	for _, rec := range aliceRecs {
		s.shredded(t, rec)
	}

	// Before the epoch, the pre-forget backup still holds alice's wrapped
	// key and her bucket's old key, under a root version that still exists:
	// only the forget record Vault keeps stops shredd from serving them (the
	// copy's start commits the forget again before serving). Whoever holds
	// the copy and the Vault token could still unwrap them outside shredd:
	// this is why a forget is only "committed" until the epoch.
	earlyDir := copyDir(t, backup)
	early := startServer(t, earlyDir, opts)
	for _, rec := range aliceRecs {
		early.shredded(t, rec)
	}
	for _, rec := range live {
		early.open(t, rec)
	}
	early.stop()

	e := s.runEpoch(t)
	if e.RootVersion != 2 || !slices.Equal(e.Retired, []int{1}) {
		t.Fatalf("epoch: %+v", e)
	}
	checkShreddedView(t, s.getForget(t, f.Forget))
	checkTrimmed(t, srv, mount, key, 2)
	for _, rec := range live {
		s.open(t, rec)
	}
	s.stop()

	// A second shredd on the pre-forget backup, against the same Vault key:
	// every bucket key in it is wrapped under the destroyed root version, so
	// nothing in it opens, alice's data and everyone else's alike. shredd
	// refuses to start on it, saying why, instead of answering 410 for
	// everyone (a database backup is restorable only until the next epoch:
	// --backup-dir takes one after every epoch).
	restored := copyDir(t, backup)
	args := append([]string{"serve", "--data-dir", restored, "--addr", "127.0.0.1:0", "--buckets", "16"}, opts.Args...)
	cli(t, "", opts.Env, nil, args...).want(t, 1, "wrapped under root version 1", "backup taken before that epoch")

	// Below the API: the copy holds alice's wrapped DEK and every bucket key
	// wrapped under version 1, which Vault refuses to decrypt or rewrap,
	// even for the root token, and cannot bring back.
	db, err := node.OpenDB(context.Background(), restored, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var liveRows int
	if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM subjects WHERE wrapped IS NOT NULL`).Scan(&liveRows); err != nil {
		t.Fatal(err)
	}
	if liveRows != 3 {
		t.Fatalf("the backup holds %d wrapped subject keys, want 3 (alice, bob, carol)", liveRows)
	}
	rows, err := db.QueryContext(context.Background(), `SELECT id, root_version, wrapped FROM buckets`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	c := srv.Client("")
	n := 0
	for rows.Next() {
		var id, v int
		var blob []byte
		if err := rows.Scan(&id, &v, &blob); err != nil {
			t.Fatal(err)
		}
		n++
		if v != 1 || !strings.HasPrefix(string(blob), "vault:v1:") {
			t.Fatalf("bucket %d in the backup: version %d, blob %.10q", id, v, blob)
		}
		for _, op := range []string{"decrypt", "rewrap"} {
			if _, err := c.Logical().Write(mount+"/"+op+"/"+key, map[string]any{"ciphertext": string(blob)}); err == nil {
				t.Fatalf("Vault %s of bucket %d's key from the backup succeeded with the root token", op, id)
			}
		}
	}
	if err := rows.Err(); err != nil || n != 16 {
		t.Fatalf("%d buckets in the backup (%v), want 16", n, err)
	}
	if _, err := c.Logical().Write(mount+"/keys/"+key+"/config", map[string]any{"min_decryption_version": 1}); err == nil {
		t.Fatalf("Vault lowered min_decryption_version below the trimmed versions")
	}
	checkTrimmed(t, srv, mount, key, 2)
}

// testVaultAppRole: shredd logs in with AppRole (role id in a flag, secret
// id in a file, no token), runs a forget and an epoch with the role's
// least-privilege token, and fails closed with a wrong secret id.
func testVaultAppRole(t *testing.T) {
	srv := newVault(t)
	const mount, key = "transit", "shredd-approle"
	c := srv.Client("")
	if err := c.Sys().PutPolicy("shredd", vault.Policy(mount, key)); err != nil {
		t.Fatal(err)
	}
	if err := c.Sys().EnableAuthWithOptions("approle", &vaultapi.EnableAuthOptions{Type: "approle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Logical().Write("auth/approle/role/shredd", map[string]any{"token_policies": []string{"shredd"}, "token_ttl": "1h"}); err != nil {
		t.Fatal(err)
	}
	sec, err := c.Logical().Read("auth/approle/role/shredd/role-id")
	if err != nil {
		t.Fatal(err)
	}
	roleID, _ := sec.Data["role_id"].(string)
	sec, err = c.Logical().Write("auth/approle/role/shredd/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	secretID, _ := sec.Data["secret_id"].(string)
	secrets := t.TempDir()
	good, bad := filepath.Join(secrets, "good"), filepath.Join(secrets, "bad")
	if err := os.WriteFile(good, []byte(secretID+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("00000000-0000-0000-0000-000000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := func(secretFile string) serverOpts {
		return serverOpts{Env: vaultEnv(""), Args: []string{"--root", "vault", "--vault-addr", srv.Addr, "--vault-key", key,
			"--vault-approle-role-id", roleID, "--vault-approle-secret-id-file", secretFile, "--cache-ttl", "1ns"}}
	}

	dir := t.TempDir()
	s := startServer(t, dir, opts(good))
	s.putKinds(t, "episodic")
	alice := s.seal(t, sealReq{Subject: "alice", Kind: "episodic"}, "alice via approle", "a")
	bob := s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob via approle", "b")
	s.open(t, alice)
	f := s.forget(t, "alice")
	s.waitForget(t, f.Forget, "re-keyed", func(f forgetView) bool { return f.RekeyedAt != nil })
	s.endStory(t, srv, mount, key, f.Forget, alice, bob)

	// A wrong secret id: Vault refuses the login, so the start-up checks
	// cannot run and nothing is served; the start says why and retries.
	s = startProcess(t, dir, opts(bad))
	waitLogged(t, s, "the root store does not answer")
	waitLogged(t, s, "approle login")
	if listeningAddr(s.logs.Bytes()) != "" {
		t.Fatalf("served with a wrong secret id before the start-up checks ran:\n%s", s.logs)
	}
	s.stop()

	s = startServer(t, dir, opts(good))
	s.open(t, bob)
	s.shredded(t, alice)
	s.stop()
}

// waitLogged waits until the server's logs contain msg.
func waitLogged(t *testing.T, s *server, msg string) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !strings.Contains(s.logs.String(), msg) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not log %q within %v:\n%s", msg, hang, s.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
