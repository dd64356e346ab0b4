package main

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/cmd/shredd/node"
	"github.com/shredd/shredd/testkit/pgtest"
	"github.com/shredd/shredd/testkit/vaulttest"
)

// emptyDir is a new, empty data directory: a node's disk with nothing on
// it.
func emptyDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// forgetRecords lists the forget records Vault keeps for key.
func forgetRecords(t *testing.T, v *vaulttest.Server, key string) []string {
	t.Helper()
	sec, err := v.Client("").Logical().List("secret/metadata/shredd/" + key + "/forgets/")
	if err != nil {
		t.Fatalf("list the forget records: %v", err)
	}
	var out []string
	if sec != nil {
		keys, _ := sec.Data["keys"].([]any)
		for _, k := range keys {
			out = append(out, k.(string))
		}
	}
	return out
}

// TestStatelessNodes: nodes on one PostgreSQL and one Vault root start
// from their flags, a Vault token and empty data directories — the shared
// secrets come from Vault (kept there, wrapped, by the first node), nothing
// is copied — and a forget is kept where no restore of the database and no
// node's disk can take it: a node started alone on a dump from before the
// forget (one that never answered it, and one whose disk was replaced)
// refuses the forgotten subject before serving, and the forget's id
// answers.
func TestStatelessNodes(t *testing.T) {
	pg := pgtest.Shared(t)
	dsn := pg.NewDatabase(t)
	v := newVault(t)
	const mount, key = "transit", "shredd-stateless"
	opts := vaultOpts(v, mount, key, "--store", dsn, "--cache-ttl", "2s", "--lease-ttl", "3s")

	a := startServer(t, emptyDir(t), opts)
	o := opts
	o.Token = a.token // the operator's credential: the first node made it
	b := startServer(t, emptyDir(t), o)
	c := startServer(t, emptyDir(t), o)
	nodes := []*server{a, b, c}
	// Every node took the same secrets from Vault; Vault holds them
	// wrapped, never as they are.
	for _, name := range []string{node.SecretFile, node.AttestationKeyFile, node.LogKeyFile, node.LogVKeyFile, node.AttestationPubFile} {
		want, err := os.ReadFile(filepath.Join(a.dataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes[1:] {
			if got, err := os.ReadFile(filepath.Join(n.dataDir, name)); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s of %s differs from the first node's (%v)", name, n.name, err)
			}
		}
	}
	sec, err := v.Client("").Logical().Read("secret/data/shredd/" + key + "/secrets")
	if err != nil || sec == nil {
		t.Fatalf("the shared secrets are not in Vault: %v", err)
	}
	if w, _ := sec.Data["data"].(map[string]any)["wrapped"].(string); !strings.HasPrefix(w, "vault:v") {
		t.Fatalf("Vault keeps the shared secrets as %.20q..., want a Transit ciphertext", w)
	}

	a.putKinds(t, "episodic")
	alice := a.seal(t, sealReq{Subject: "alice@example.com", Kind: "episodic"}, "alice likes tea", "m1")
	bob := b.seal(t, sealReq{Subject: "bob@example.com", Kind: "episodic"}, "bob likes coffee", "m2")
	for _, n := range nodes {
		n.open(t, alice)
		n.open(t, bob)
	}
	beforeForget := pgDump(t, pg, dsn)
	f := b.forget(t, "alice@example.com")
	for _, n := range nodes {
		n.shredded(t, alice)
	}
	if recs := forgetRecords(t, v, key); len(recs) == 0 {
		t.Fatal("the forget answered 202 but Vault keeps no forget record")
	}
	for _, n := range nodes {
		n.stop()
	}

	// The restore window: a node that did not answer the forget (its
	// ledger lacks it) starts alone on the dump from before it.
	pgRestore(t, pg, dsn, beforeForget)
	a2 := startServer(t, a.dataDir, o)
	a2.shredded(t, alice)
	a2.open(t, bob)
	if g := a2.getForget(t, f.Forget); g.Forget != f.Forget {
		t.Fatalf("the forget after the restore: %+v", g)
	}
	if !strings.Contains(a2.logs.String(), "committed them again") || !strings.Contains(a2.logs.String(), `"from_root_store_records":1`) {
		t.Errorf("the start on the restored dump did not say it committed the forget again:\n%s", tail(a2.logs.String(), 30))
	}
	a2.stop()

	// A node's disk lost: the node that answered the forget starts on a
	// new, empty disk, alone, on the same old dump.
	pgRestore(t, pg, dsn, beforeForget)
	b2 := startServer(t, emptyDir(t), o)
	b2.shredded(t, alice)
	b2.open(t, bob)
	if g := b2.getForget(t, f.Forget); g.Forget != f.Forget {
		t.Fatalf("the forget after the restore on a new disk: %+v", g)
	}

	// A data directory of another instance (other secrets) is refused.
	other := emptyDir(t)
	if err := os.WriteFile(filepath.Join(other, node.SecretFile), bytes.Repeat([]byte{7}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runToExit(t, append([]string{"serve", "--data-dir", other, "--addr", "127.0.0.1:0", "--buckets", "16"}, o.Args...), o.Env)
	if code == 0 || !strings.Contains(out, "differs from the shared secrets") {
		t.Fatalf("a data directory with other secrets: exit %d, want a refusal naming the difference:\n%s", code, tail(out, 20))
	}

	// The epoch shreds the forget: its record is no longer needed (a dump
	// from before the epoch is refused) and is dropped.
	b2.runEpoch(t)
	deadline := time.Now().Add(hang)
	for len(forgetRecords(t, v, key)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("forget records kept after the epoch destroyed their root versions: %v", forgetRecords(t, v, key))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := b2.do(t, http.MethodGet, "/readyz", nil).Status; st != http.StatusOK {
		t.Fatalf("readyz: %d", st)
	}

	// Vault down: forgets are still answered at once (their records wait),
	// and the records are written once Vault is back.
	carol := b2.seal(t, sealReq{Subject: "carol@example.com", Kind: "episodic"}, "carol", "m3")
	v.Stop()
	for i, subject := range []string{"carol@example.com", "dave@example.com", "erin@example.com"} {
		start := time.Now()
		b2.forget(t, subject)
		if d := time.Since(start); i > 0 && d > 2*time.Second {
			t.Fatalf("a forget with Vault down took %v to be answered", d)
		}
	}
	b2.shredded(t, carol)
	v.Start()
	deadline = time.Now().Add(hang)
	for len(forgetRecords(t, v, key)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no forget record written after Vault came back:\n%s", tail(b2.logs.String(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A record shredd did not write (planted, or made with another subject
	// secret) refuses the start: never applied, never ignored.
	b2.stop()
	planted := `{"format":"shredd-forget-record/v1","lines":[{"seq":0,"forget":"` + f.Forget + `","sid":"` + strings.Repeat("ab", 32) + `","gen":1,"requested_at":1,"committed_at":1,"deadline":1,"root_version":9,"prev":""}],"mac":"00"}`
	if _, err := v.Client("").Logical().Write("secret/data/shredd/"+key+"/forgets/00000009-0123456789abcdef",
		map[string]any{"data": map[string]any{"record": base64.StdEncoding.EncodeToString([]byte(planted))}}); err != nil {
		t.Fatal(err)
	}
	code, out = runToExit(t, append([]string{"serve", "--data-dir", b2.dataDir, "--addr", "127.0.0.1:0", "--buckets", "16"}, o.Args...), o.Env)
	if code == 0 || !strings.Contains(out, "forget record not authentic") {
		t.Fatalf("a planted forget record: exit %d, want a refusal:\n%s", code, tail(out, 20))
	}
}
