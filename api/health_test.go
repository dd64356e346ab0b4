package api_test

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/vault"
	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/testkit/shreddtest"
)

// healthEnv is a server over real SQLite files whose handler probes root (the
// key tree itself runs on a local root store), and its database.
func healthEnv(t *testing.T, root keystore.RootStore) (*env, *storage.DB) {
	t.Helper()
	st := shreddtest.New(t, shreddtest.Options{})
	probe := stackRoot(st)
	if root != nil {
		probe = keystore.Probe{RootStore: root}
	}
	srv := httptest.NewServer(api.New(api.Config{Service: st.Service, Evidence: st.Evidence, Root: probe, Tokens: st.Tokens}).Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv}, st.DB
}

// closedPort returns the address of a local TCP port nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestLiveAndReady checks /livez (200 whatever fails) and /readyz (200 only
// when the database takes a write and the root store answers; else 503
// not_ready naming the part, without the error's text), without a token.
func TestLiveAndReady(t *testing.T) {
	// A Vault root store at a port nothing listens on: a real client that
	// gets connection refused.
	down, err := vault.New(vault.Config{Address: "http://" + closedPort(t), Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		root    keystore.RootStore
		breakDB func(*testing.T, *storage.DB)
		parts   []string // named in the 503's detail; none: ready
	}{
		{name: "ready"},
		{name: "root store down", root: down, parts: []string{"root store"}},
		{name: "database closed", breakDB: func(t *testing.T, db *storage.DB) { db.Close() }, parts: []string{"database"}},
		{name: "database read-only", breakDB: readOnly, parts: []string{"database"}},
		{name: "both", root: down, breakDB: readOnly, parts: []string{"database", "root store"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, db := healthEnv(t, c.root)
			if c.breakDB != nil {
				c.breakDB(t, db)
			}
			for _, path := range []string{"/livez", "/healthz"} {
				if path == "/healthz" && c.root != nil {
					continue // /healthz probes the root store (below)
				}
				if r := e.do("GET", path, "", "Authorization", ""); r.status != 200 || str(r, "status") != "ok" {
					t.Fatalf("%s: %d %v", path, r.status, r.body)
				}
			}
			r := e.do("GET", "/readyz", "", "Authorization", "")
			if c.parts == nil {
				if r.status != 200 || str(r, "status") != "ready" || str(r, "database") != "ok" || str(r, "root_store") != "local" {
					t.Fatalf("readyz: %d %v", r.status, r.body)
				}
				return
			}
			if r.status != 503 || r.ctype != "application/problem+json" || str(r, "code") != "not_ready" {
				t.Fatalf("readyz: %d %s %v, want 503 not_ready", r.status, r.ctype, r.body)
			}
			d := str(r, "detail")
			for _, p := range c.parts {
				if !strings.Contains(d, p) {
					t.Fatalf("detail %q does not name %s", d, p)
				}
			}
			if len(c.parts) == 1 && strings.Count(d, ";") != 0 {
				t.Fatalf("detail %q names more than %s", d, c.parts[0])
			}
			for _, leak := range []string{"sql", "sqlite", "127.0.0.1", "refused", "readonly", "closed"} {
				if strings.Contains(strings.ToLower(string(r.raw)), leak) {
					t.Fatalf("the answer holds error text (%q): %s", leak, r.raw)
				}
			}
		})
	}
}

// readOnly makes every connection of db refuse writes (SQLite: PRAGMA
// query_only; PostgreSQL: read-only transactions), as a read-only file, a
// full disk or a standby server would: reads still work.
func readOnly(t *testing.T, db *storage.DB) {
	t.Helper()
	db.SetMaxOpenConns(1)
	q := `PRAGMA query_only = ON`
	if db.Engine().Name() == "postgres" {
		q = `SET SESSION default_transaction_read_only = on`
	}
	if _, err := db.ExecContext(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	tokens, err := access.OpenTokens(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Count(context.Background()); err != nil {
		t.Fatalf("reads fail too: %v", err)
	}
}

// TestReadyDisks checks that /readyz probes every disk of Config.Disks with
// a real file: a directory that cannot take one (here, one that does not
// exist yet) answers 503 not_ready naming only that disk, with
// Retry-After; once it can, 200 with every disk ok, and the probes leave
// no file behind.
func TestReadyDisks(t *testing.T) {
	st := shreddtest.New(t, shreddtest.Options{})
	data, backups := t.TempDir(), t.TempDir()
	ledger := filepath.Join(t.TempDir(), "ledger")
	srv := httptest.NewServer(api.New(api.Config{Service: st.Service, Evidence: st.Evidence, Root: stackRoot(st), Tokens: st.Tokens,
		Disks: []api.Disk{{Name: "data", Dir: data}, {Name: "ledger", Dir: ledger}, {Name: "backups", Dir: backups}}}).Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, srv: srv}
	r := e.do("GET", "/readyz", "", "Authorization", "")
	if r.status != 503 || str(r, "code") != "not_ready" || r.header.Get("Retry-After") == "" {
		t.Fatalf("readyz with a missing ledger directory: %d %v (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"))
	}
	if d := str(r, "detail"); !strings.Contains(d, "disk ledger") || strings.Contains(d, "disk data") || strings.Contains(d, "disk backups") {
		t.Fatalf("detail %q, want the ledger disk alone", d)
	}
	if err := os.Mkdir(ledger, 0o700); err != nil {
		t.Fatal(err)
	}
	// The failed probe's result is reused for a second: poll.
	deadline := time.Now().Add(hang)
	for r.status != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("readyz once the ledger directory exists: %d %v", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
		r = e.do("GET", "/readyz", "", "Authorization", "")
	}
	disks, _ := r.body["disks"].(map[string]any)
	for _, n := range []string{"data", "ledger", "backups"} {
		if disks[n] != "ok" {
			t.Fatalf("readyz disks %v, want %s ok", disks, n)
		}
	}
	for _, d := range []string{data, ledger, backups} {
		if left, _ := os.ReadDir(d); len(left) != 0 {
			t.Fatalf("the probe left %v in %s", left, d)
		}
	}
}
