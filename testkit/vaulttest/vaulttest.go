// Package vaulttest runs a real HashiCorp Vault server on 127.0.0.1 for
// tests: the binary built from the official Go module by
// scripts/vault-build.sh (never a fake). Dev servers are in memory; a
// persistent server keeps its storage in a temporary directory, so it can be
// stopped, restarted, sealed and unsealed to test failing closed; a cluster
// (StartCluster) is several persistent servers on integrated storage (Raft)
// whose nodes can be killed and restarted to test failing over.
package vaulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/shredd/shredd/testkit/freeport"
)

// Binary returns the path of the Vault binary: $SHREDD_VAULT_BIN, or
// .cache/bin/vault at the root of the shredd module. It fails the test when
// there is none: a missing Vault must never turn into a skipped test.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SHREDD_VAULT_BIN"); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "vault", "go.mod")); err == nil {
			p := filepath.Join(dir, ".cache", "bin", "vault")
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("no Vault binary at %s: run scripts/vault-build.sh (./scripts/test.sh does it)", p)
			}
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("vaulttest: cannot find the shredd module root (tools/vault/go.mod)")
		}
		dir = parent
	}
}

// Server is a running Vault.
type Server struct {
	t          testing.TB
	bin        string
	dir        string
	persistent bool
	Addr       string // http://127.0.0.1:PORT
	RootToken  string
	unsealKey  string

	caCert string // PEM of the CA of a TLS dev server

	mu   sync.Mutex
	cmd  *exec.Cmd
	args []string
	logs *SyncBuffer
}

// Num reads a number of a Vault answer (sec.Data[...]): a JSON number, or
// a decimal string; -1 for anything else.
func Num(v any) int {
	switch x := v.(type) {
	case json.Number:
		n, _ := x.Int64()
		return int(n)
	case float64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return -1
}

// SyncBuffer is a buffer a process's output goroutine and the test can use
// at once: it collects the output of the servers the tests start.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// Bytes returns a copy of what was written so far.
func (b *SyncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b.Bytes())
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// freePort returns a port PORT free with PORT+1 (dev servers and cluster
// nodes also listen on PORT+1 for clustering), below the ephemeral range
// (freeport): a cluster node binds PORT+1 only once it has joined,
// seconds later, and a port of the ephemeral range could be an outgoing
// connection's by then.
func freePort(t testing.TB) int {
	t.Helper()
	p, err := freeport.Ports(2)
	if err != nil {
		t.Fatalf("vaulttest: %v", err)
	}
	return p
}

// Dev starts `vault server -dev` (in memory, root token "root") with the
// Transit engine mounted at transit/, and stops it when the test ends.
func Dev(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), RootToken: "root"}
	port := freePort(t)
	s.Addr = "http://127.0.0.1:" + strconv.Itoa(port)
	s.start("server", "-dev", "-dev-root-token-id=root", "-dev-listen-address=127.0.0.1:"+strconv.Itoa(port), "-dev-no-store-token")
	t.Cleanup(s.Stop)
	s.waitUp()
	s.mountTransit()
	return s
}

// DevTLS starts `vault server -dev -dev-tls`: like Dev, but serving HTTPS
// with a generated CA, whose PEM file is CACert.
func DevTLS(t testing.TB) (*Server, string) {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), RootToken: "root"}
	port := freePort(t)
	s.Addr = "https://127.0.0.1:" + strconv.Itoa(port)
	certDir := filepath.Join(s.dir, "tls")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.caCert = filepath.Join(certDir, "vault-ca.pem")
	s.start("server", "-dev", "-dev-tls", "-dev-tls-cert-dir="+certDir, "-dev-root-token-id=root",
		"-dev-listen-address=127.0.0.1:"+strconv.Itoa(port), "-dev-no-store-token")
	t.Cleanup(s.Stop)
	s.waitUp()
	s.mountTransit()
	return s, s.caCert
}

// Persistent starts a Vault server with file storage in a temporary
// directory, initialises it with one unseal key, unseals it and mounts
// Transit. Restart, Seal and Unseal keep its data.
func Persistent(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), persistent: true}
	port := freePort(t)
	s.Addr = "http://127.0.0.1:" + strconv.Itoa(port)
	cfg := fmt.Sprintf(`storage "file" { path = %q }
listener "tcp" {
  address = "127.0.0.1:%d"
  tls_disable = true
}
api_addr = %q
disable_mlock = true
ui = false
`, filepath.Join(s.dir, "data"), port, s.Addr)
	if err := os.WriteFile(filepath.Join(s.dir, "vault.hcl"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start("server", "-config="+filepath.Join(s.dir, "vault.hcl"))
	t.Cleanup(s.Stop)
	s.waitUp()
	c := s.client("")
	init, err := c.Sys().Init(&vaultapi.InitRequest{SecretShares: 1, SecretThreshold: 1})
	if err != nil {
		t.Fatalf("vault init: %v", err)
	}
	s.RootToken, s.unsealKey = init.RootToken, init.KeysB64[0]
	s.Unseal()
	s.mountTransit()
	return s
}

func (s *Server) start(args ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs = &SyncBuffer{}
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), "VAULT_ADDR="+s.Addr, "HOME="+s.dir)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start vault: %v", err)
	}
	s.cmd = cmd
	s.args = args
}

// Client returns a Vault API client for the server with the given token
// (the root token when empty).
func (s *Server) Client(token string) *vaultapi.Client {
	if token == "" {
		token = s.RootToken
	}
	return s.client(token)
}

func (s *Server) client(token string) *vaultapi.Client {
	cfg := vaultapi.DefaultConfig()
	cfg.Address = s.Addr
	cfg.MaxRetries = 0
	if s.caCert != "" {
		if err := cfg.ConfigureTLS(&vaultapi.TLSConfig{CACert: s.caCert}); err != nil {
			s.t.Fatal(err)
		}
	}
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	c.SetToken(token)
	return c
}

func (s *Server) waitUp() {
	s.t.Helper()
	waitFor(s.t, "vault to answer sys/health at "+s.Addr, s.up, s.Logs)
}

// up reports whether the server answers sys/health (initialised or not,
// sealed or not).
func (s *Server) up() (bool, string) {
	if s.caCert != "" {
		// The CA file appears once the server has generated it.
		if _, err := os.Stat(s.caCert); err != nil {
			return false, "no CA file yet: " + err.Error()
		}
		if _, err := s.client("").Sys().Health(); err != nil {
			return false, err.Error()
		}
		return true, ""
	}
	resp, err := http.Get(s.Addr + "/v1/sys/health?uninitcode=200&sealedcode=200&standbycode=200")
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, "sys/health " + resp.Status
}

// mountTransit mounts the Transit engine at transit/ and, on a persistent
// server (a dev server has one), a KV version 2 engine at secret/, where
// shredd keeps its forget ledger's head.
func (s *Server) mountTransit() {
	err := s.client(s.RootToken).Sys().Mount("transit", &vaultapi.MountInput{Type: "transit"})
	if err != nil {
		s.t.Fatalf("mount transit: %v", err)
	}
	if s.persistent {
		err := s.client(s.RootToken).Sys().Mount("secret", &vaultapi.MountInput{Type: "kv", Options: map[string]string{"version": "2"}})
		if err != nil {
			s.t.Fatalf("mount kv: %v", err)
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart stops a persistent server and starts it again on the same address
// and storage, unsealed.
func (s *Server) Restart() {
	if !s.persistent {
		s.t.Fatal("vaulttest: only a persistent server can restart")
	}
	s.Stop()
	s.Start()
}

// Start starts a stopped persistent server again and unseals it.
func (s *Server) Start() {
	s.start(s.args...)
	s.waitUp()
	s.Unseal()
}

// Seal seals a persistent server: it answers 503 until unsealed.
func (s *Server) Seal() {
	if err := s.client(s.RootToken).Sys().SealWithContext(context.Background()); err != nil {
		s.t.Fatalf("seal: %v", err)
	}
}

// Unseal unseals a persistent server.
func (s *Server) Unseal() {
	if !s.persistent {
		return
	}
	st, err := s.client("").Sys().Unseal(s.unsealKey)
	if err != nil || st.Sealed {
		s.t.Fatalf("unseal: %v (sealed=%v)", err, st != nil && st.Sealed)
	}
	waitFor(s.t, "vault at "+s.Addr+" to serve as the active node after its unseal (sys/health 200)", func() (bool, string) {
		resp, err := http.Get(s.Addr + "/v1/sys/health")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "sys/health " + resp.Status
	}, s.Logs)
}

// waitTimeout bounds every wait of this package: a server coming up, an
// unseal, a cluster forming, a leader elected, a node rejoining. It only
// catches a hang: each wait polls the state it needs, none is a timing
// assertion. Generous, because the tests share two cores with others and a
// restarted Raft node's peer was seen refusing it for over a minute under
// load.
const waitTimeout = 3 * time.Minute

// waitFor polls done every 100 ms until it reports true. Past waitTimeout
// it fails the test naming what it waited for, done's last account of the
// state, and what logs returns.
func waitFor(t testing.TB, what string, done func() (ok bool, state string), logs func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, state := done()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("vaulttest: waited %v for %s; the last state: %s\n%s", waitTimeout, what, state, logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Logs returns what the server printed so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}
