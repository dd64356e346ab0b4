package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"github.com/shredd/shredd/registry"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reregisterOut is one line that shredd reregister prints.
type reregisterOut struct {
	Source   string `json:"source"`
	Artifact string `json:"artifact"`
	Status   string `json:"status"`
	Error    *struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
	} `json:"error"`
}

// reregisterLines parses the JSON lines of a shredd reregister run.
func reregisterLines(t *testing.T, out []byte) []reregisterOut {
	t.Helper()
	var all []reregisterOut
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var o reregisterOut
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("shredd reregister printed %q: %v", sc.Bytes(), err)
		}
		all = append(all, o)
	}
	return all
}

// tamperArtifactID returns ct with one bit of its header's artifact id
// flipped (bytes 6 to 21 of the binary form: magic, version, algorithm,
// then the id): still a well-formed envelope, naming another artifact,
// whose AEAD no longer opens.
func tamperArtifactID(t *testing.T, ct string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(ct, "shredd:v1:"))
	if err != nil {
		t.Fatal(err)
	}
	b[6] ^= 1
	return "shredd:v1:" + base64.RawURLEncoding.EncodeToString(b)
}

// TestRestoreLosesRegistrationsFailsClosed is route 4 of issue 23: records
// sealed after a backup outlive the registry when that backup is restored.
// Decrypting them must fail closed (409 unknown_artifact, naming the cause
// and the repair) until shredd reregister registers them again from their
// envelopes; then they decrypt, a forget's dry run lists them and the
// forget makes them 410. The repair trusts only the authenticated header:
// a tampered envelope is refused, and so is the envelope of a subject
// forgotten after the restore or re-applied from the forget ledger.
func TestRestoreLosesRegistrationsFailsClosed(t *testing.T) {
	for _, root := range []string{"local", "vault"} {
		t.Run(root, func(t *testing.T) {
			t.Parallel()
			restoreLosesRegistrations(t, root)
		})
	}
}

// restoreLosesRegistrations is TestRestoreLosesRegistrationsFailsClosed
// on one root store.
func restoreLosesRegistrations(t *testing.T, root string) {
	dir := t.TempDir()
	opts := serverOpts{Buckets: 4}
	var env []string
	if root == "vault" {
		opts = vaultOpts(newVault(t), "transit", "shredd-rereg")
		opts.Buckets = 4
		env = opts.Env
	}
	s := startServer(t, dir, opts)
	s.putKinds(t, "episodic")
	// Every subject has a key in the backup: an envelope of a subject whose
	// key the backup lacks could not be opened by anyone.
	aliceBefore := s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice before", "ctx")
	s.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob before", "ctx")
	s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol before", "ctx")
	s.seal(t, sealReq{Subject: "dave", Kind: "episodic"}, "dave before", "ctx")
	backup := filepath.Join(t.TempDir(), "before.db")
	cli(t, "", env, nil, "backup", "--data-dir", dir, "--out", backup).want(t, 0)

	aliceAfter := s.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice after", "ctx")
	bobAfter := s.seal(t, sealReq{Subjects: []string{"bob", "alice@example.com"}, Kind: "episodic"}, "bob and alice after", "ctx")
	carolAfter := s.seal(t, sealReq{Subject: "carol", Kind: "episodic"}, "carol after", "ctx")
	daveAfter := s.seal(t, sealReq{Subject: "dave", Kind: "episodic"}, "dave after", "ctx")
	// dave is forgotten before the restore: the ledger re-applies it.
	s.forget(t, "dave")
	s.stop()

	loseDatabase(t, dir)
	// The registration WAL lost too (or a backup older than what it keeps):
	// nothing registers the records sealed after the backup again.
	if err := os.RemoveAll(filepath.Join(dir, registry.WALDir)); err != nil {
		t.Fatal(err)
	}
	// The root keeps the WAL's mark: the registrations lost are named, and
	// nothing goes on until the loss is accepted (recorded with the root).
	if root == "local" {
		// shredd restore reads the mark in root.key.
		cli(t, "", env, nil, "restore", "--data-dir", dir, backup).want(t, 1, "shredd acknowledged up to", "--accept-loss")
		cli(t, "", env, nil, "restore", "--accept-loss", "--data-dir", dir, backup).want(t, 0)
	} else {
		// Vault's mark: the start refuses.
		cli(t, "", env, nil, "restore", "--data-dir", dir, backup).want(t, 0)
		serve := append([]string{"serve", "--data-dir", dir, "--addr", "127.0.0.1:0", "--buckets", "4"}, opts.Args...)
		cli(t, "", env, nil, serve...).want(t, 1, "were acknowledged", "shredd wal accept-loss")
		cli(t, "", env, nil, append([]string{"wal", "accept-loss", "--data-dir", dir}, opts.Args...)...).want(t, 0)
	}
	s = startServer(t, dir, opts)
	s.open(t, aliceBefore)
	s.shredded(t, daveAfter)
	for _, rec := range []record{aliceAfter, bobAfter, carolAfter} {
		p := s.expectProblem(t, http.StatusConflict, "unknown_artifact", http.MethodPost, "/v1/decrypt", decryptReq(rec))
		if !strings.Contains(p.Detail, "older than the ciphertext") || !strings.Contains(p.Detail, "shredd reregister") {
			t.Fatalf("decrypt %s: the refusal names neither the cause nor the repair: %+v", rec.name, p)
		}
	}
	// Not in a batch either.
	var batch struct {
		BatchResults []struct {
			Error *struct {
				Status int    `json:"status"`
				Code   string `json:"code"`
			} `json:"error"`
		} `json:"batch_results"`
	}
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/decrypt", map[string]any{"batch_input": []any{decryptReq(aliceAfter)}}).into(t, &batch)
	if e := batch.BatchResults[0].Error; e == nil || e.Status != http.StatusConflict || e.Code != "unknown_artifact" {
		t.Fatalf("batch decrypt of an unregistered artifact: %+v", batch)
	}

	// carol is forgotten after the restore.
	s.forget(t, "carol")

	cenv := []string{"SHREDD_URL=" + s.base, "SHREDD_DATA_DIR=" + dir}
	file := filepath.Join(t.TempDir(), "envelopes.txt")
	lines := strings.Join([]string{"# sealed after the backup", aliceAfter.ciphertext, tamperArtifactID(t, bobAfter.ciphertext), "",
		aliceBefore.ciphertext, carolAfter.ciphertext, daveAfter.ciphertext}, "\n") + "\n"
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	run := cli(t, "", cenv, nil, "reregister", "--context", "ctx", file).want(t, 1, "1 registered, 1 already known, 3 refused")
	got := reregisterLines(t, run.stdout)
	want := []struct {
		line, status, code, artifact string
	}{
		{":2", "registered", "", aliceAfter.artifact},
		{":3", "", "invalid_envelope", ""},
		{":5", "known", "", aliceBefore.artifact},
		{":6", "", "shredded", ""},
		{":7", "", "shredded", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("shredd reregister printed %d results, want %d:\n%s", len(got), len(want), run.stdout)
	}
	for i, w := range want {
		g := got[i]
		if !strings.HasSuffix(g.Source, w.line) || g.Status != w.status || (w.artifact != "" && g.Artifact != w.artifact) ||
			(w.code == "") != (g.Error == nil) || (g.Error != nil && g.Error.Code != w.code) {
			t.Errorf("result %d: %+v (error %+v), want %+v", i, g, g.Error, w)
		}
	}
	s.open(t, aliceAfter)
	s.shredded(t, carolAfter)
	s.shredded(t, daveAfter)
	s.expectProblem(t, http.StatusConflict, "unknown_artifact", http.MethodPost, "/v1/decrypt", decryptReq(bobAfter))

	// The right envelope from standard input, again with one already done:
	// idempotent, exit 0.
	stdin := []byte(bobAfter.ciphertext + "\n" + aliceAfter.ciphertext + "\n")
	run = cli(t, "", cenv, stdin, "reregister", "--context", "ctx").want(t, 0, "1 registered, 1 already known, 0 refused")
	if got := reregisterLines(t, run.stdout); len(got) != 2 || got[0].Status != "registered" || got[1].Status != "known" {
		t.Fatalf("second run: %s", run.stdout)
	}
	s.open(t, bobAfter)

	// The wrong context does not open the envelope: nothing is trusted.
	cli(t, "", cenv, []byte(aliceAfter.ciphertext+"\n"), "reregister", "--context", "other").want(t, 1, "0 registered, 0 already known, 1 refused")

	// The dry run of alice's forget lists the artifacts registered again,
	// and the forget makes them unreadable.
	var preview struct {
		Artifacts []struct {
			Artifact string `json:"artifact"`
		} `json:"artifacts"`
	}
	s.expect(t, http.StatusOK, http.MethodPost, "/v1/forget", map[string]any{"subject": "alice@example.com", "dry_run": true}).into(t, &preview)
	listed := map[string]bool{}
	for _, a := range preview.Artifacts {
		listed[a.Artifact] = true
	}
	for _, rec := range []record{aliceBefore, aliceAfter, bobAfter} {
		if !listed[rec.artifact] {
			t.Errorf("the dry run of alice's forget does not list %s (%s): %+v", rec.name, rec.artifact, preview)
		}
	}
	s.forget(t, "alice@example.com")
	s.shredded(t, aliceAfter)
	s.shredded(t, bobAfter)
	s.shredded(t, aliceBefore)

	// Only an admin token may re-register.
	tok := strings.TrimSpace(string(cli(t, "", env, nil, "token", "create", "--data-dir", dir, "--name", "writer", "--scopes", "encrypt,decrypt,register").want(t, 0).stdout))
	r, err := s.callToken(http.MethodPost, "/v1/artifacts/reregister", tok, map[string]string{"ciphertext": aliceAfter.ciphertext})
	if err != nil || r.Status != http.StatusForbidden {
		t.Fatalf("reregister with a token without the admin scope: %v %d %s", err, r.Status, r.Body)
	}
	s.stop()
}

// TestPostgresRestoreLosesRegistrations is the same repair on a real
// PostgreSQL (pg_dump, pg_restore): a record sealed after the dump answers
// 409 unknown_artifact after the restore, shredd reregister registers it
// again (the group commit's multi-row inserts and batched live checks of a
// shared database), it decrypts, and a forget makes it 410.
func TestPostgresRestoreLosesRegistrations(t *testing.T) {
	srv, dsn, dir, opts, a := startOnPostgres(t)
	before := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice before", "c")
	a.seal(t, sealReq{Subject: "bob", Kind: "episodic"}, "bob before", "c")
	dump := pgDump(t, srv, dsn)
	after := a.seal(t, sealReq{Subjects: []string{"alice@example.com", "bob"}, Kind: "episodic"}, "alice and bob after", "c")
	a.stop()

	pgRestore(t, srv, dsn, dump)
	b := startServer(t, dir, opts)
	b.open(t, before)
	b.expectProblem(t, http.StatusConflict, "unknown_artifact", http.MethodPost, "/v1/decrypt", decryptReq(after))
	env := []string{"SHREDD_URL=" + b.base, "SHREDD_TOKEN=" + b.token}
	run := cli(t, "", env, []byte(after.ciphertext+"\n"+before.ciphertext+"\n"), "reregister", "--context", "c").want(t, 0, "1 registered, 1 already known, 0 refused")
	if got := reregisterLines(t, run.stdout); len(got) != 2 || got[0].Artifact != after.artifact || got[0].Status != "registered" {
		t.Fatalf("shredd reregister: %s", run.stdout)
	}
	b.open(t, after)
	b.forget(t, "bob")
	b.shredded(t, after)
	b.open(t, before)
	b.stop()
}
